//! The SSE parser never panics, and how the bytes are cut into chunks never changes
//! the events: one chunk, the fuzzer's cut points, and byte by byte give the same.
#![no_main]

use keel_adapters::sse::{SseEvent, SseParser};
use libfuzzer_sys::fuzz_target;

fn parse(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool, Vec<SseEvent>) {
    let mut p = SseParser::new();
    let mut events = Vec::new();
    for c in chunks {
        events.extend(p.push(c));
    }
    let partial = p.has_partial();
    let tail = p.finish();
    assert!(!p.has_partial(), "finish leaves nothing behind");
    (events, partial, tail)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, body)) = data.split_first() else {
        return;
    };
    let whole = parse(&[body]);
    // Cut points derived from the first byte.
    let step = usize::from(cuts % 13) + 1;
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    assert_eq!(parse(&pieces), whole, "chunks of {step}");
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(parse(&bytes), whole, "byte by byte");
});
