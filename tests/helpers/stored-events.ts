/**
 * The events a harness store holds for a session, as its rows list them: a row is one stored
 * event, or the events written together from its key on (`StoredEventRow`).
 */
/** The stored events of `rows` (a `list` of a session's `ev/` keys), oldest first. */
export function storedEvents<T = { record: { index: number; event: unknown } }>(
  rows: readonly (readonly [string, unknown])[],
): T[] {
  const events: T[] = [];
  for (const [, row] of rows) {
    if (Array.isArray(row)) events.push(...(row as T[]));
    else events.push(row as T);
  }
  return events;
}
