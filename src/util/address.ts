import { isIPv6 } from 'node:net';

/**
 * The client address that per-address limits count under. An IPv6 host is given a whole /64 (a
 * home line, a cloud instance), and picks any address in it at will: its addresses count as one,
 * the /64, or each would have a bucket of its own. An IPv4 address written as IPv6
 * (`::ffff:203.0.113.9`) is that IPv4 address.
 */
export function limitedAddress(ip: string): string {
  if (!isIPv6(ip)) return ip;
  const address = ip.split('%')[0] as string;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1] as string;
  // The first four groups; `::` stands for the zero groups that make eight (a dotted IPv4 ending is two).
  const groups = (part: string) => (part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])));
  const [head = '', tail] = address.split('::');
  const before = groups(head);
  const all =
    tail === undefined ? before : [...before, ...Array<string>(8 - before.length - groups(tail).length).fill('0'), ...groups(tail)];
  return `${all
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
