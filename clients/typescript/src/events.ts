// `GET /events` as an async iterator: server-sent events parsed into typed change events.

import { ReMeError, UnauthorizedError } from "./errors.js";
import type { ChangeEvent, StreamItem } from "./types.js";

/** One parsed SSE block: its `event:` type, `data:` lines joined, `id:`; `retry` when the block set one. */
interface Block {
  event: string;
  data: string;
  id: string;
  retry: boolean;
}

/** The blocks of an SSE byte stream (the `text/event-stream` format: lines, a blank line ends a block). */
async function* blocks(body: ReadableStream<Uint8Array>): AsyncGenerator<Block> {
  const decoder = new TextDecoder();
  let buffer = "";
  let block: Block = { event: "", data: "", id: "", retry: false };
  let hasData = false;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
        if (line === "") {
          if (hasData || block.retry) yield block;
          block = { event: "", data: "", id: "", retry: false };
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) continue; // a comment: the server's keep-alive
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") block.event = value;
        else if (field === "id") block.id = value;
        else if (field === "retry") block.retry = true;
        else if (field === "data") {
          block.data = hasData ? `${block.data}\n${value}` : value;
          hasData = true;
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * An open `GET /events` stream. Iterate it (`for await (const event of stream)`) for `ChangeEvent`s and, when the
 * reader fell behind, `{type: "lagged", lost}` items; `close()` ends it (so does `break`). When the server ends the
 * stream because its API key was revoked, the iteration throws `UnauthorizedError`.
 *
 * `ReMeClient.events()` resolves to one only once the server has subscribed it: no event after that is missed.
 */
export class EventStream implements AsyncIterableIterator<StreamItem> {
  readonly #blocks: AsyncGenerator<Block>;
  readonly #abort: AbortController;

  /** @internal built by `EventStream.open` */
  constructor(source: AsyncGenerator<Block>, abort: AbortController) {
    this.#blocks = source;
    this.#abort = abort;
  }

  /** @internal reads up to the server's `retry:` line (sent once the subscription is in place) */
  static async open(body: ReadableStream<Uint8Array>, abort: AbortController): Promise<EventStream> {
    const source = blocks(body);
    for (;;) {
      const first = await source.next();
      if (first.done) throw new ReMeError("the event stream ended before it started", { code: "stream_ended", status: 200 });
      if (first.value.retry) return new EventStream(source, abort);
    }
  }

  async next(): Promise<IteratorResult<StreamItem>> {
    for (;;) {
      let step: IteratorResult<Block>;
      try {
        step = await this.#blocks.next();
      } catch (err) {
        if (this.#abort.signal.aborted) return { done: true, value: undefined };
        throw err;
      }
      if (step.done) return { done: true, value: undefined };
      const { event, data } = step.value;
      if (!data) continue;
      const parsed = JSON.parse(data) as Record<string, unknown>;
      if (event === "revoked") {
        this.close();
        throw new UnauthorizedError(String(parsed.message ?? "the stream's API key was revoked"), {
          code: String(parsed.code ?? "unauthorized"),
          status: 401,
        });
      }
      if (event === "lagged") return { done: false, value: { type: "lagged", lost: Number(parsed.lost ?? 0) } };
      return { done: false, value: parsed as unknown as ChangeEvent };
    }
  }

  async return(): Promise<IteratorResult<StreamItem>> {
    this.close();
    return { done: true, value: undefined };
  }

  /** Close the connection. */
  close(): void {
    this.#abort.abort();
  }

  [Symbol.asyncIterator](): EventStream {
    return this;
  }
}
