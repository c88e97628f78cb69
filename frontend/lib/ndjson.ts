// NDJSON stream reading: one JSON value per line, lines may be split across
// (and several lines packed into) the chunks a stream delivers.

/**
 * Splits text into complete lines, keeping a partial last line until the
 * chunk that completes it arrives. Blank lines are skipped; a trailing "\r"
 * is dropped.
 */
export class LineSplitter {
  private buffer = "";

  /** Feeds one chunk; returns the lines it completed. */
  push(chunk: string): string[] {
    this.buffer += chunk;
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const nl = this.buffer.indexOf("\n", start);
      if (nl < 0) break;
      const line = stripCR(this.buffer.slice(start, nl));
      if (line.trim() !== "") lines.push(line);
      start = nl + 1;
    }
    this.buffer = this.buffer.slice(start);
    return lines;
  }

  /** Ends the input; returns the last line if it had no newline. */
  flush(): string[] {
    const rest = stripCR(this.buffer);
    this.buffer = "";
    return rest.trim() === "" ? [] : [rest];
  }
}

function stripCR(line: string): string {
  return line.endsWith("\r") ? line.slice(0, -1) : line;
}

export class NdjsonParseError extends Error {
  readonly line: string;
  constructor(line: string, cause: unknown) {
    super(`invalid NDJSON line: ${line.length > 200 ? line.slice(0, 200) + "…" : line}`);
    this.name = "NdjsonParseError";
    this.line = line;
    this.cause = cause;
  }
}

function parseLine<T>(line: string): T {
  try {
    return JSON.parse(line) as T;
  } catch (err) {
    throw new NdjsonParseError(line, err);
  }
}

/**
 * Yields each JSON value of an NDJSON byte stream as soon as its line is
 * complete. UTF-8 sequences split across chunks are decoded correctly.
 * Breaking out of the loop cancels the stream.
 */
export async function* readNdjson<T = unknown>(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<T, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  const splitter = new LineSplitter();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const line of splitter.push(decoder.decode(value, { stream: true }))) {
        yield parseLine<T>(line);
      }
    }
    finished = true;
    for (const line of splitter.push(decoder.decode())) yield parseLine<T>(line);
    for (const line of splitter.flush()) yield parseLine<T>(line);
  } finally {
    if (!finished) {
      // The consumer stopped early (or parsing failed): close the stream.
      await reader.cancel().catch(() => {});
    }
    reader.releaseLock();
  }
}
