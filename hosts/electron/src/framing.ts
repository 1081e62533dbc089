/**
 * JSON-lines framing: turns a byte stream into complete lines.
 *
 * Chunks may end anywhere, also in the middle of a line or of a multi-byte UTF-8
 * character. Bytes are kept until a `\n` arrives and only then decoded, so a
 * character split across chunks is decoded whole (a `\n` byte never occurs inside a
 * multi-byte UTF-8 sequence). A trailing `\r` is removed.
 */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  /** Feeds one chunk; returns the lines it completed, in order. */
  push(chunk: Buffer | Uint8Array | string): string[] {
    let buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk);
    const lines: string[] = [];
    let nl = buf.indexOf(0x0a);
    while (nl !== -1) {
      const head = buf.subarray(0, nl);
      const whole = this.pendingBytes > 0 ? Buffer.concat([...this.pending, head]) : head;
      this.pending = [];
      this.pendingBytes = 0;
      lines.push(decodeLine(whole));
      buf = buf.subarray(nl + 1);
      nl = buf.indexOf(0x0a);
    }
    if (buf.length > 0) {
      // Copy: the caller may reuse its chunk buffer.
      this.pending.push(Buffer.from(buf));
      this.pendingBytes += buf.length;
    }
    return lines;
  }

  /** Returns what is left after the stream ended (a last line without `\n`), if any. */
  flush(): string | null {
    if (this.pendingBytes === 0) return null;
    const rest = Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    return decodeLine(rest);
  }

  /** Bytes received but not yet part of a complete line. */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }
}

function decodeLine(bytes: Buffer): string {
  const end = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.length - 1 : bytes.length;
  return bytes.toString("utf8", 0, end);
}

/** Keeps the last `size` lines of a stream (for example a child's stderr). */
export class LineRing {
  private readonly lines: string[] = [];
  private readonly splitter = new LineSplitter();

  constructor(private readonly size: number) {}

  /** Feeds one chunk; returns the complete lines it contained. */
  push(chunk: Buffer | Uint8Array | string): string[] {
    const lines = this.splitter.push(chunk);
    for (const l of lines) this.add(l);
    return lines;
  }

  /** Ends the stream: a last line without `\n` counts as a line. */
  end(): string | null {
    const rest = this.splitter.flush();
    if (rest !== null) this.add(rest);
    return rest;
  }

  /** The kept lines, oldest first. */
  tail(): string[] {
    return [...this.lines];
  }

  private add(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.size) this.lines.shift();
  }
}
