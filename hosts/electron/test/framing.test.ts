import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { LineRing, LineSplitter } from "../src";

describe("LineSplitter", () => {
  it("joins a line split across chunks and splits several lines in one chunk", () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push('{"a":'), []);
    assert.deepEqual(s.push('1}\n{"b":2}\n{"c"'), ['{"a":1}', '{"b":2}']);
    assert.deepEqual(s.push(":3}\n"), ['{"c":3}']);
    assert.equal(s.bufferedBytes, 0);
  });

  it("decodes a multi-byte character split between chunks, byte by byte", () => {
    const text = '{"text":"héllo — 世界 🚀"}\n{"text":"ça"}\n';
    const bytes = Buffer.from(text, "utf8");
    const s = new LineSplitter();
    const lines: string[] = [];
    for (let i = 0; i < bytes.length; i++) lines.push(...s.push(bytes.subarray(i, i + 1)));
    assert.deepEqual(lines, ['{"text":"héllo — 世界 🚀"}', '{"text":"ça"}']);
    assert.deepEqual(lines.map((l) => JSON.parse(l).text), ["héllo — 世界 🚀", "ça"]);
  });

  it("splits at every possible point of a chunk boundary", () => {
    const text = "ä€😀x\r\nzweite Zeile ü\n";
    const bytes = Buffer.from(text, "utf8");
    for (let cut = 0; cut <= bytes.length; cut++) {
      const s = new LineSplitter();
      const lines = [...s.push(bytes.subarray(0, cut)), ...s.push(bytes.subarray(cut))];
      assert.deepEqual(lines, ["ä€😀x", "zweite Zeile ü"], `cut at byte ${cut}`);
    }
  });

  it("does not keep a reference to the caller's buffer", () => {
    const s = new LineSplitter();
    const chunk = Buffer.from("abc", "utf8");
    s.push(chunk);
    chunk.fill(0x21);
    assert.deepEqual(s.push("def\n"), ["abcdef"]);
  });

  it("returns a last line without newline on flush", () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push("one\ntwo"), ["one"]);
    assert.equal(s.flush(), "two");
    assert.equal(s.flush(), null);
  });
});

describe("LineRing", () => {
  it("keeps only the last lines, counting an unterminated last line", () => {
    const ring = new LineRing(3);
    ring.push("1\n2\n3\n4");
    assert.deepEqual(ring.tail(), ["1", "2", "3"]);
    ring.push("\n5\n6");
    ring.end();
    assert.deepEqual(ring.tail(), ["4", "5", "6"]);
  });
});
