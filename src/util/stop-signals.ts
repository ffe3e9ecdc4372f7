/** SIGTERM and SIGINT, watched from before a server starts until its process ends. */
export interface StopSignals {
  /** Aborted at the first of them, with the signal's name as its reason. */
  readonly signal: AbortSignal;
  /** Called at each signal after the first (an impatient supervisor, Ctrl-C twice). */
  onRepeat(handler: (name: NodeJS.Signals) => void): void;
}

/**
 * Takes SIGTERM and SIGINT from Node's default, which ends the process at once (status 143 or
 * 130): from here on they ask the server to stop, whether it is still starting or serving.
 */
export function watchStopSignals(): StopSignals {
  const stop = new AbortController();
  let repeat: (name: NodeJS.Signals) => void = () => undefined;
  const on = (name: NodeJS.Signals) => (stop.signal.aborted ? repeat(name) : stop.abort(name));
  process.on('SIGTERM', on);
  process.on('SIGINT', on);
  return {
    signal: stop.signal,
    onRepeat(handler) {
      repeat = handler;
    },
  };
}
