/**
 * One event of a `text/event-stream` (the brain API's and the inspector's live streams).
 *
 * @module
 */

/** A server-sent event: its name (default `message`), its id, and its data as JSON (one line). */
export function serverSentEvent(message: { event?: string; id?: string; data: unknown }): string {
  const event = message.event !== undefined ? `event: ${message.event}\n` : "";
  const id = message.id !== undefined ? `id: ${message.id}\n` : "";
  return `${event}data: ${JSON.stringify(message.data)}\n${id}\n`;
}
