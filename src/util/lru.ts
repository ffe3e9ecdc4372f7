/** A size-bounded map that forgets the least recently used key. */
export class Lru<K, V> {
  private readonly map = new Map<K, V>();
  /** The most recently used key: reading it again needs no reordering. */
  private newest: K | undefined = undefined;

  constructor(readonly capacity: number) {}

  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined && key !== this.newest) {
      this.map.delete(key);
      this.map.set(key, v);
      this.newest = key;
    }
    return v;
  }

  set(key: K, value: V): void {
    if (this.capacity <= 0) return;
    this.map.delete(key);
    this.map.set(key, value);
    this.newest = key;
    if (this.map.size > this.capacity) {
      const oldest = this.map.keys().next();
      if (!oldest.done) this.map.delete(oldest.value);
    }
  }

  delete(key: K): void {
    this.map.delete(key);
    if (key === this.newest) this.newest = undefined;
  }

  clear(): void {
    this.map.clear();
    this.newest = undefined;
  }

  get size(): number {
    return this.map.size;
  }
}
