/**
 * A push-based async iterator: the producer pushes values, ends or fails it; the
 * consumer reads with `for await`. Breaking out of the loop closes it.
 */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  private readonly values: T[] = [];
  private readonly waiters: Array<{
    resolve: (r: IteratorResult<T>) => void;
    reject: (e: unknown) => void;
  }> = [];
  private done = false;
  private failure: { error: unknown } | null = null;

  constructor(private readonly onClose?: () => void) {}

  /** Whether the queue still accepts values. */
  get open(): boolean {
    return !this.done && this.failure === null;
  }

  push(value: T): void {
    if (!this.open) return;
    const w = this.waiters.shift();
    if (w) w.resolve({ value, done: false });
    else this.values.push(value);
  }

  /** Ends the iteration after the values already pushed. */
  end(): void {
    if (!this.open) return;
    this.done = true;
    if (this.values.length === 0) this.settleWaiters();
    this.onClose?.();
  }

  /** Fails the iteration after the values already pushed. */
  fail(error: unknown): void {
    if (!this.open) return;
    this.failure = { error };
    if (this.values.length === 0) this.settleWaiters();
    this.onClose?.();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.values.length > 0) {
      return Promise.resolve({ value: this.values.shift() as T, done: false });
    }
    if (this.failure !== null) {
      const { error } = this.failure;
      // Report the failure once; later reads just end.
      this.failure = null;
      this.done = true;
      return Promise.reject(error);
    }
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  return(): Promise<IteratorResult<T>> {
    const wasOpen = this.open;
    this.done = true;
    this.failure = null;
    this.values.length = 0;
    this.settleWaiters();
    if (wasOpen) this.onClose?.();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }

  private settleWaiters(): void {
    const waiters = this.waiters.splice(0);
    for (const w of waiters) {
      if (this.failure !== null) {
        const { error } = this.failure;
        this.failure = null;
        this.done = true;
        w.reject(error);
      } else {
        w.resolve({ value: undefined, done: true });
      }
    }
  }
}
