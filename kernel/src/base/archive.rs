//! The session export file (`keel sessions export`, [`crate::Kernel::export_session`]):
//! a gzip-compressed tar whose entries are, in this order,
//!
//! - `keel-export.json`: the header, `{"format": "keel-session-export", "version": 1,
//!   "sessionId", "workspace", "exportedAt", "keelVersion"}`;
//! - `session/state.json`: the session's stored state (`PersistedSession`) without its
//!   conversation;
//! - `session/history.jsonl`: the conversation, one message per line;
//! - `session/events.jsonl`: the event log, one envelope per line;
//! - `objects/<sha256>`: every checkpoint object (file contents and trees), each once;
//! - `checkpoints/<NNNNNNNN>.json`: the checkpoint records, oldest first;
//! - `end.json`: `{"entries": N}`, the number of entries before it. A file without it
//!   was cut short.
//!
//! Reading is strict: the header first, each name one of the above (a name that is
//! absolute or climbs out with `..` is refused as unsafe, any other one as
//! unexpected), regular files only, each below a size limit, nothing after `end.json`,
//! and the gzip stream read to its end so that its checksum is checked. Every
//! failure is a `REQUEST_INVALID` whose `details.reason` says which:
//! `not_found`, `not_an_export`, `unsupported_version`, `truncated`, `damaged`,
//! `unsafe_entry`, `unexpected_entry`, `too_large`. Names are parsed, never used as
//! paths.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use keel_envelope::{ErrorCode, ErrorPayload};
use serde::{Deserialize, Serialize};

/// The header's `format`.
pub(crate) const FORMAT: &str = "keel-session-export";
/// The version of the format this runtime writes and reads.
pub(crate) const VERSION: u32 = 1;
/// The first entry.
const HEADER: &str = "keel-export.json";
/// The last entry.
const END: &str = "end.json";
/// At most this many bytes in one entry of the session (state, history, log).
const MAX_SESSION_ENTRY: u64 = 1 << 30;
/// At most this many bytes in one object or record.
const MAX_OBJECT: u64 = 256 << 20;

/// The first entry of an export.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Header {
    pub format: String,
    pub version: u32,
    pub session_id: String,
    pub workspace: String,
    #[serde(default)]
    pub exported_at: u64,
    #[serde(default)]
    pub keel_version: String,
}

/// One entry after the header.
#[derive(Debug)]
pub(crate) enum Item<'a> {
    State(&'a [u8]),
    History(&'a [u8]),
    Events(&'a [u8]),
    Object { hash: &'a str, bytes: &'a [u8] },
    Record { seq: u64, bytes: &'a [u8] },
}

/// A file that cannot be read as an export: `REQUEST_INVALID`, `details.reason`.
pub(crate) fn bad(reason: &str, message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message)
        .with_detail("reason", reason)
        .with_detail("field", "file")
}

/// Writes an export, entry by entry.
pub(crate) struct Writer<W: Write> {
    tar: tar::Builder<GzEncoder<BufWriter<W>>>,
    entries: u64,
    mtime: u64,
}

impl<W: Write> Writer<W> {
    /// Starts an export on `out` with its header.
    pub fn new(out: W, header: &Header) -> io::Result<Self> {
        let gz = GzEncoder::new(BufWriter::with_capacity(1 << 20, out), Compression::fast());
        let mut tar = tar::Builder::new(gz);
        tar.mode(tar::HeaderMode::Deterministic);
        let mut w = Writer {
            tar,
            entries: 0,
            mtime: header.exported_at / 1000,
        };
        let body = serde_json::to_vec_pretty(header).map_err(io::Error::other)?;
        w.entry(HEADER, &body)?;
        Ok(w)
    }

    /// Adds one entry.
    pub fn entry(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(self.mtime);
        h.set_entry_type(tar::EntryType::Regular);
        self.tar.append_data(&mut h, name, bytes)?;
        self.entries += 1;
        Ok(())
    }

    /// Writes `end.json`, ends the tar and the gzip stream; gives back the output.
    pub fn finish(mut self) -> io::Result<W> {
        let end = serde_json::to_vec(&serde_json::json!({ "entries": self.entries }))
            .map_err(io::Error::other)?;
        self.entry(END, &end)?;
        let gz = self.tar.into_inner()?;
        let buf = gz.finish()?;
        buf.into_inner().map_err(|e| e.into_error())
    }
}

/// What an I/O error met while reading means for the file.
fn read_error(e: &io::Error, started: bool) -> ErrorPayload {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => bad(
            "truncated",
            "the export file is cut short (it ends before its last entry): copy it again",
        ),
        _ if !started => bad(
            "not_an_export",
            format!("not a keel session export (a gzip-compressed tar made by `keel sessions export`): {e}"),
        ),
        _ => bad("damaged", format!("the export file is damaged: {e}")),
    }
}

/// What an entry's name is.
enum Name {
    State,
    History,
    Events,
    Object(String),
    Record(u64),
    End,
    Header,
}

fn parse_name(raw: &[u8]) -> Result<Name, ErrorPayload> {
    let shown = String::from_utf8_lossy(raw).into_owned();
    let unsafe_name = || {
        bad(
            "unsafe_entry",
            format!(
                "the export holds an entry named {shown:?}, which would leave its folder: refused"
            ),
        )
        .with_detail("entry", shown.clone())
    };
    let text = std::str::from_utf8(raw).map_err(|_| unsafe_name())?;
    if text.starts_with('/')
        || text.contains('\\')
        || text.contains('\0')
        || text
            .split('/')
            .any(|c| c == ".." || c == "." || c.is_empty())
    {
        return Err(unsafe_name());
    }
    let unexpected = || {
        bad(
            "unexpected_entry",
            format!("the export holds an entry {text:?} that this format does not have"),
        )
        .with_detail("entry", text)
    };
    Ok(match text {
        HEADER => Name::Header,
        END => Name::End,
        "session/state.json" => Name::State,
        "session/history.jsonl" => Name::History,
        "session/events.jsonl" => Name::Events,
        _ => {
            if let Some(h) = text.strip_prefix("objects/") {
                if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Ok(Name::Object(h.to_ascii_lowercase()));
                }
            }
            if let Some(stem) = text
                .strip_prefix("checkpoints/")
                .and_then(|r| r.strip_suffix(".json"))
            {
                if stem.len() == 8 && stem.bytes().all(|b| b.is_ascii_digit()) {
                    return stem.parse().map(Name::Record).map_err(|_| unexpected());
                }
            }
            return Err(unexpected());
        }
    })
}

fn read_all(
    entry: &mut impl Read,
    size: u64,
    limit: u64,
    name: &str,
) -> Result<Vec<u8>, ErrorPayload> {
    if size > limit {
        return Err(bad(
            "too_large",
            format!("entry {name} of the export is {size} bytes, more than the {limit} this runtime reads"),
        ));
    }
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(1 << 24));
    entry
        .take(size)
        .read_to_end(&mut buf)
        .map_err(|e| read_error(&e, true))?;
    if (buf.len() as u64) < size {
        return Err(read_error(&io::ErrorKind::UnexpectedEof.into(), true));
    }
    Ok(buf)
}

/// Reads the export at `path`: `header` gets the header (and may refuse it), then
/// `item` every entry in order. Fails unless the file is whole.
pub(crate) fn read(
    path: &Path,
    header: &mut dyn FnMut(&Header) -> Result<(), ErrorPayload>,
    item: &mut dyn FnMut(Item<'_>) -> Result<(), ErrorPayload>,
) -> Result<(), ErrorPayload> {
    let file = File::open(path).map_err(|e| {
        let reason = if e.kind() == io::ErrorKind::NotFound {
            "not_found"
        } else {
            "unreadable"
        };
        bad(reason, format!("cannot open {}: {e}", path.display()))
            .with_detail("path", path.display().to_string())
    })?;
    let mut input = BufReader::with_capacity(1 << 20, file);
    let magic = input.fill_buf().map_err(|e| read_error(&e, false))?;
    if !magic.starts_with(&[0x1f, 0x8b]) {
        return Err(bad(
            "not_an_export",
            format!(
                "{} is not a keel session export (a gzip-compressed tar made by `keel sessions export`)",
                path.display()
            ),
        ));
    }
    let mut gz = GzDecoder::new(input);
    {
        let mut archive = tar::Archive::new(&mut gz);
        let entries = archive.entries().map_err(|e| read_error(&e, false))?;
        let mut count: u64 = 0;
        let mut ended = false;
        let mut seen = [false; 3];
        for entry in entries {
            let mut entry = entry.map_err(|e| read_error(&e, count > 0))?;
            if ended {
                return Err(bad("damaged", "the export has entries after its end"));
            }
            let name = parse_name(&entry.path_bytes()).map_err(|e| {
                if count == 0 {
                    bad(
                        "not_an_export",
                        "not a keel session export: it does not start with keel-export.json",
                    )
                } else {
                    e
                }
            })?;
            if !matches!(entry.header().entry_type(), tar::EntryType::Regular) {
                return Err(bad(
                    "unexpected_entry",
                    "the export holds an entry that is not a regular file",
                ));
            }
            let size = entry.size();
            match (count, name) {
                (0, Name::Header) => {
                    let body = read_all(&mut entry, size, 1 << 20, HEADER)?;
                    let h: Header = serde_json::from_slice(&body).map_err(|e| {
                        bad(
                            "not_an_export",
                            format!("not a keel session export: its header cannot be read: {e}"),
                        )
                    })?;
                    if h.format != FORMAT {
                        return Err(bad(
                            "not_an_export",
                            format!("not a keel session export: its format is {:?}", h.format),
                        ));
                    }
                    if h.version != VERSION {
                        return Err(bad(
                            "unsupported_version",
                            format!(
                                "the export is of format version {}; this keel reads version {VERSION} (use a keel of the version that made it, or a newer one)",
                                h.version
                            ),
                        )
                        .with_detail("version", h.version)
                        .with_detail("supported", VERSION));
                    }
                    header(&h)?;
                }
                (0, _) => {
                    return Err(bad(
                        "not_an_export",
                        "not a keel session export: it does not start with keel-export.json",
                    ))
                }
                (_, Name::Header) => return Err(bad("damaged", "the export has two headers")),
                (_, Name::End) => {
                    let body = read_all(&mut entry, size, 1 << 10, END)?;
                    let said: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
                        bad("damaged", format!("the export's end cannot be read: {e}"))
                    })?;
                    if said["entries"].as_u64() != Some(count) {
                        return Err(bad(
                            "damaged",
                            format!(
                                "the export's end says {} entries, it has {count}",
                                said["entries"]
                            ),
                        ));
                    }
                    ended = true;
                }
                (_, n @ (Name::State | Name::History | Name::Events)) => {
                    let (slot, label) = match n {
                        Name::State => (0, "session/state.json"),
                        Name::History => (1, "session/history.jsonl"),
                        _ => (2, "session/events.jsonl"),
                    };
                    if std::mem::replace(&mut seen[slot], true) {
                        return Err(bad("damaged", format!("the export has {label} twice")));
                    }
                    let body = read_all(&mut entry, size, MAX_SESSION_ENTRY, label)?;
                    item(match slot {
                        0 => Item::State(&body),
                        1 => Item::History(&body),
                        _ => Item::Events(&body),
                    })?;
                }
                (_, Name::Object(hash)) => {
                    let body = read_all(&mut entry, size, MAX_OBJECT, "objects/…")?;
                    item(Item::Object {
                        hash: &hash,
                        bytes: &body,
                    })?;
                }
                (_, Name::Record(seq)) => {
                    let body = read_all(&mut entry, size, MAX_OBJECT, "checkpoints/…")?;
                    item(Item::Record { seq, bytes: &body })?;
                }
            }
            count += 1;
        }
        if count == 0 {
            return Err(bad(
                "not_an_export",
                "not a keel session export: the file holds no entry",
            ));
        }
        if !ended {
            return Err(read_error(&io::ErrorKind::UnexpectedEof.into(), true));
        }
    }
    // The rest of the gzip stream, so its checksum is checked.
    io::copy(&mut gz, &mut io::sink()).map_err(|e| read_error(&e, true))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            session_id: "sess_1".into(),
            workspace: "/w".into(),
            exported_at: 1_700_000_000_000,
            keel_version: "0".into(),
        }
    }

    fn sample() -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), &header()).expect("writer");
        w.entry("session/state.json", br#"{"a":1}"#).expect("state");
        w.entry("session/events.jsonl", b"{}\n{}\n")
            .expect("events");
        let obj = b"content";
        let h = object_name(obj);
        w.entry(&format!("objects/{h}"), obj).expect("object");
        w.entry("checkpoints/00000001.json", b"{}").expect("record");
        w.finish().expect("finish")
    }

    fn object_name(bytes: &[u8]) -> String {
        use std::fmt::Write as _;
        // SHA-256 is not a dependency of the kernel: any 64 hex digits name an object
        // for the reader, which leaves checking contents to the checkpoint importer.
        let mut s = String::new();
        for b in bytes.iter().cycle().take(32) {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// Reads `bytes` as a file; the entries seen, or the error.
    fn read_bytes(bytes: &[u8]) -> Result<Vec<String>, ErrorPayload> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.keel");
        std::fs::write(&path, bytes).expect("write");
        let mut seen = Vec::new();
        let seen_ref = std::cell::RefCell::new(&mut seen);
        read(&path, &mut |_| Ok(()), &mut |item| {
            let name = match item {
                Item::State(_) => "state".to_owned(),
                Item::History(_) => "history".to_owned(),
                Item::Events(_) => "events".to_owned(),
                Item::Object { hash, .. } => format!("object {hash}"),
                Item::Record { seq, .. } => format!("record {seq}"),
            };
            seen_ref.borrow_mut().push(name);
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn a_whole_file_reads_back_in_order() {
        let seen = read_bytes(&sample()).expect("read");
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert_eq!(seen[0], "state");
        assert_eq!(seen[3], "record 1");
    }

    #[test]
    fn every_cut_is_refused_as_cut_short_or_not_an_export() {
        let whole = sample();
        for n in 0..whole.len() {
            let e = read_bytes(&whole[..n]).expect_err("a cut file");
            assert_eq!(e.code, ErrorCode::RequestInvalid);
            let reason = e.details["reason"].as_str().expect("reason").to_owned();
            assert!(
                ["truncated", "not_an_export", "damaged"].contains(&reason.as_str()),
                "cut at {n}: {reason}: {}",
                e.message
            );
            if n >= 16 {
                assert_eq!(reason, "truncated", "cut at {n}: {}", e.message);
            }
        }
    }

    #[test]
    fn a_changed_byte_anywhere_never_panics_and_is_refused_when_it_matters() {
        let whole = sample();
        for i in 0..whole.len() {
            for flip in [0x01u8, 0x80] {
                let mut b = whole.clone();
                b[i] ^= flip;
                match read_bytes(&b) {
                    // Bytes the gzip header does not check (its time, its flags for
                    // the operating system) change nothing read.
                    Ok(seen) => assert_eq!(seen.len(), 4, "byte {i}"),
                    Err(e) => {
                        assert_eq!(e.code, ErrorCode::RequestInvalid, "byte {i}");
                        assert!(e.details.get("reason").is_some(), "byte {i}");
                    }
                }
            }
        }
    }
}
