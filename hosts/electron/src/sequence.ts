/**
 * The sequence rule, checked on the host side: within one `requestId`, `sequence`
 * starts at 1 and grows by exactly 1 (docs/protocol.md, "The sequence rule").
 */

/** A break in a request's stream: the sequence expected and the one received. */
export interface SequenceGap {
  requestId: string;
  expected: number;
  got: number;
}

/** The fields of an envelope the check looks at. */
export interface Sequenced {
  requestId: string;
  sequence: number;
  meta?: { replay?: boolean | null } | null;
}

/**
 * Tracks the next expected sequence of every request stream.
 *
 * Live events must continue their stream exactly. Events replayed by
 * `session.resume` (`meta.replay: true`) keep their original sequences, so a
 * replayed stream this host has not seen may start anywhere, and a replayed event
 * this host already has is not a break.
 */
export class SequenceTracker {
  private readonly next = new Map<string, number>();

  /**
   * Checks one envelope and advances its stream. Returns the gap, or null when the
   * envelope continues its stream. After a gap, the stream continues from the
   * envelope received.
   */
  check(env: Sequenced): SequenceGap | null {
    const expected = this.next.get(env.requestId);
    const replay = env.meta?.replay === true;
    if (expected === undefined) {
      this.next.set(env.requestId, env.sequence + 1);
      if (replay || env.sequence === 1) return null;
      return { requestId: env.requestId, expected: 1, got: env.sequence };
    }
    if (env.sequence === expected) {
      this.next.set(env.requestId, expected + 1);
      return null;
    }
    if (replay && env.sequence < expected) return null;
    this.next.set(env.requestId, env.sequence + 1);
    return { requestId: env.requestId, expected, got: env.sequence };
  }

  /** Declares that the host already has `requestId` up to `sequence` (a resume cursor). */
  seed(requestId: string, sequence: number): void {
    const known = this.next.get(requestId);
    if (known === undefined || known < sequence + 1) this.next.set(requestId, sequence + 1);
  }

  /** The next sequence expected on `requestId`, or undefined for an unseen stream. */
  expected(requestId: string): number | undefined {
    return this.next.get(requestId);
  }
}
