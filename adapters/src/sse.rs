//! A server-sent events parser that works on raw byte chunks.
//!
//! Chunks may split lines anywhere, including inside a multi-byte UTF-8 character:
//! lines are assembled as bytes and decoded only once complete (a line break byte
//! never occurs inside a multi-byte character). Handles `\n`, `\r\n` and `\r` line
//! ends, multi-line `data:` fields, `event:` fields and `:` comments.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// An incremental parser: feed bytes with [`SseParser::push`], collect events.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// A new parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.skip_lf {
                self.skip_lf = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.skip_lf = true;
                    self.end_line(&mut out);
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// Ends the input. Leniently (the specification would discard it), an event
    /// not followed by a blank line is dispatched: servers that end with
    /// `data: [DONE]` and no blank line are common. A caller that needs to know
    /// whether the input ended cleanly checks [`SseParser::has_partial`] first.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        if self.has_data {
            self.end_line(&mut out);
        }
        out
    }

    /// Whether an event is partly received (data seen but not yet dispatched).
    pub fn has_partial(&self) -> bool {
        self.has_data || !self.line.is_empty()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                });
            } else {
                self.event = None;
            }
            self.has_data = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn all_at_once(input: &[u8]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = p.push(input);
        out.extend(p.finish());
        out
    }

    #[test]
    fn parses_events_comments_and_multiline_data() {
        let input =
            ": ping\n\nevent: message_start\ndata: {\"a\":1}\n\ndata: line1\ndata: line2\n\n";
        let events = all_at_once(input.as_bytes());
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("message_start".into()),
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: None,
                    data: "line1\nline2".into()
                },
            ]
        );
    }

    #[test]
    fn handles_crlf_and_cr() {
        let events = all_at_once(b"data: a\r\n\r\ndata:b\r\rdata: c\n\n");
        let data: Vec<_> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, vec!["a", "b", "c"]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let input =
            "event: x\r\ndata: {\"t\":\"héllo 世界 🎉\"}\r\n\r\n: c\ndata: [DONE]\n\n".as_bytes();
        let expected = all_at_once(input);
        assert_eq!(expected.len(), 2);
        assert_eq!(expected[0].data, "{\"t\":\"héllo 世界 🎉\"}");
        for i in 0..=input.len() {
            for j in i..=input.len() {
                let mut p = SseParser::new();
                let mut got = p.push(&input[..i]);
                got.extend(p.push(&input[i..j]));
                got.extend(p.push(&input[j..]));
                got.extend(p.finish());
                assert_eq!(got, expected, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn an_unterminated_event_is_dispatched_at_the_end() {
        let mut p = SseParser::new();
        assert!(p.push(b"data: [DONE]").is_empty());
        assert!(p.has_partial());
        assert_eq!(
            p.finish(),
            vec![SseEvent {
                event: None,
                data: "[DONE]".into()
            }]
        );
        assert!(!p.has_partial());
        let mut p = SseParser::new();
        assert!(p.push(b"event: x\ndata: y\n").is_empty());
        assert_eq!(p.finish().len(), 1);
        assert!(SseParser::new().finish().is_empty());
    }
}
