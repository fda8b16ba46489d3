/** Data in one canonical form, so equal data compares and is written identically whatever its key order. */

/** A copy of JSON-like data with every object's keys in sorted order (`Uint8Array`s are kept as they are). */
export function sortedData<T>(value: T): T {
  if (Array.isArray(value)) return value.map(sortedData) as T;
  if (value === null || typeof value !== "object" || value instanceof Uint8Array) return value;
  const entries = Object.keys(value)
    .sort()
    .flatMap((k) => {
      const v = (value as Record<string, unknown>)[k];
      return v === undefined ? [] : [[k, sortedData(v)]];
    });
  return Object.fromEntries(entries) as T;
}

/** Whether two JSON values are equal, whatever their key order (`undefined` members count as absent). */
export function sameData(a: unknown, b: unknown): boolean {
  return JSON.stringify(sortedData(a)) === JSON.stringify(sortedData(b));
}
