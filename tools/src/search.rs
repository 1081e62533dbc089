//! `search_files`: content search with ripgrep's own library crates (a parallel
//! `ignore` walk, `grep-regex` matching, `grep-searcher` line search with memory maps
//! off and binary files skipped, as ripgrep does for directory searches) and name
//! search with `globset`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, MmapChoice, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::{WalkBuilder, WalkState};
use keel_envelope::tools::{SearchFilesArgs, SearchFilesResult, SearchMatch, SearchMode};
use keel_envelope::{ErrorCode, ErrorPayload};

use crate::fs::resolve_read;
use crate::jail;
use crate::ToolContext;

/// Default number of results.
pub const DEFAULT_MAX_RESULTS: u32 = 200;
/// Largest `maxResults`.
pub const MAX_RESULTS: u32 = 5000;
/// Largest `contextLines`.
pub const MAX_CONTEXT: u32 = 10;
/// Longest snippet line, in characters.
pub const SNIPPET_MAX_CHARS: usize = 400;

fn invalid(field: &str, message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ToolArgumentsInvalid, message).with_detail("field", field)
}

/// Runs a search. Blocking; call it from a blocking task.
pub fn search_files(
    args: SearchFilesArgs,
    ctx: &ToolContext,
) -> Result<SearchFilesResult, ErrorPayload> {
    if args.query.is_empty() {
        return Err(invalid("query", "`query` is empty"));
    }
    let max = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS);
    if max == 0 || max > MAX_RESULTS {
        return Err(invalid(
            "maxResults",
            format!("`maxResults` must be between 1 and {MAX_RESULTS}"),
        ));
    }
    let context = args.context_lines.unwrap_or(0);
    if context > MAX_CONTEXT {
        return Err(invalid(
            "contextLines",
            format!("`contextLines` must be at most {MAX_CONTEXT}"),
        ));
    }
    let raw_path = args.path.clone().unwrap_or_else(|| ".".to_owned());
    let r = resolve_read(ctx, &raw_path)?;
    if !r.exists {
        return Err(ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("`{raw_path}` does not exist"),
        )
        .with_detail("path", raw_path));
    }
    let overrides = match &args.glob {
        Some(g) => {
            let mut ob = ignore::overrides::OverrideBuilder::new(&r.abs);
            ob.add(g)
                .map_err(|e| invalid("glob", format!("bad `glob`: {e}")))?;
            Some(
                ob.build()
                    .map_err(|e| invalid("glob", format!("bad `glob`: {e}")))?,
            )
        }
        None => None,
    };
    let root = jail::canonical_root(&ctx.workspace);
    let mut wb = WalkBuilder::new(&r.abs);
    wb.require_git(false).follow_links(false);
    if let Some(o) = overrides {
        wb.overrides(o);
    }
    match args.mode.unwrap_or_default() {
        SearchMode::Name => name_search(&args, wb, &root, max as usize, &ctx.cancel),
        // Content, the default (the arguments accept the known modes only).
        _ => content_search(
            &args,
            wb,
            &root,
            max as usize,
            context as usize,
            &ctx.cancel,
        ),
    }
}

struct Collected {
    matches: Mutex<Vec<SearchMatch>>,
    count: AtomicUsize,
    files: AtomicU64,
    truncated: AtomicBool,
}

fn display(root: &Path, p: &Path) -> String {
    jail::relative_display(root, p)
}

fn content_search(
    args: &SearchFilesArgs,
    wb: WalkBuilder,
    root: &Path,
    max: usize,
    context: usize,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<SearchFilesResult, ErrorPayload> {
    let mut mb = RegexMatcherBuilder::new();
    match args.case_sensitive {
        Some(true) => mb.case_insensitive(false),
        Some(false) => mb.case_insensitive(true),
        None => mb.case_smart(true),
    };
    mb.fixed_strings(!args.regex.unwrap_or(false))
        .line_terminator(Some(b'\n'));
    let matcher = mb
        .build(&args.query)
        .map_err(|e| invalid("query", format!("bad regular expression: {e}")))?;
    let mut sb = SearcherBuilder::new();
    sb.line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .memory_map(MmapChoice::never())
        .before_context(context)
        .after_context(context);
    let searcher_proto = sb.build();
    let shared = Arc::new(Collected {
        matches: Mutex::new(Vec::new()),
        count: AtomicUsize::new(0),
        files: AtomicU64::new(0),
        truncated: AtomicBool::new(false),
    });
    let root = root.to_path_buf();
    wb.build_parallel().run(|| {
        let matcher = matcher.clone();
        let mut searcher = searcher_proto.clone();
        let shared = Arc::clone(&shared);
        let root = root.clone();
        let cancel = cancel.clone();
        Box::new(move |entry| {
            if cancel.is_cancelled() || shared.truncated.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            shared.files.fetch_add(1, Ordering::Relaxed);
            let mut sink = FileSink { lines: Vec::new() };
            if searcher
                .search_path(&matcher, entry.path(), &mut sink)
                .is_err()
            {
                return WalkState::Continue;
            }
            if !sink.lines.iter().any(|l| l.is_match) {
                return WalkState::Continue;
            }
            let hits = snippets(&display(&root, entry.path()), &sink.lines, context);
            let before = shared.count.fetch_add(hits.len(), Ordering::Relaxed);
            let room = max.saturating_sub(before);
            let take = hits.len().min(room);
            if take < hits.len() {
                shared.truncated.store(true, Ordering::Relaxed);
            }
            if take > 0 {
                if let Ok(mut m) = shared.matches.lock() {
                    m.extend(hits.into_iter().take(take));
                }
            }
            if shared.truncated.load(Ordering::Relaxed) {
                WalkState::Quit
            } else {
                WalkState::Continue
            }
        })
    });
    if cancel.is_cancelled() {
        return Err(ErrorPayload::new(
            ErrorCode::Interrupted,
            "the search was cancelled",
        ));
    }
    let mut matches = shared.matches.lock().map(|m| m.clone()).unwrap_or_default();
    matches.sort_by(|a, b| a.path.cmp(&b.path).then(a.line.cmp(&b.line)));
    Ok(SearchFilesResult {
        matches,
        truncated: shared.truncated.load(Ordering::Relaxed),
        files_searched: shared.files.load(Ordering::Relaxed),
    })
}

struct Line {
    number: u64,
    text: String,
    is_match: bool,
}

struct FileSink {
    lines: Vec<Line>,
}

fn line_text(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim_end_matches(['\n', '\r']);
    if s.chars().count() > SNIPPET_MAX_CHARS {
        let cut: String = s.chars().take(SNIPPET_MAX_CHARS).collect();
        format!("{cut}…")
    } else {
        s.to_owned()
    }
}

impl Sink for FileSink {
    type Error = std::io::Error;

    fn matched(
        &mut self,
        _s: &grep_searcher::Searcher,
        m: &SinkMatch<'_>,
    ) -> Result<bool, Self::Error> {
        let number = m.line_number().unwrap_or(0);
        self.lines.push(Line {
            number,
            text: line_text(m.bytes()),
            is_match: true,
        });
        Ok(true)
    }

    fn context(
        &mut self,
        _s: &grep_searcher::Searcher,
        c: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        let number = c.line_number().unwrap_or(0);
        self.lines.push(Line {
            number,
            text: line_text(c.bytes()),
            is_match: false,
        });
        Ok(true)
    }
}

fn snippets(path: &str, lines: &[Line], context: usize) -> Vec<SearchMatch> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate().filter(|(_, l)| l.is_match) {
        let snippet = if context == 0 {
            l.text.clone()
        } else {
            let lo = l.number.saturating_sub(context as u64);
            let hi = l.number + context as u64;
            let start = lines[..i]
                .iter()
                .rposition(|x| x.number < lo)
                .map(|p| p + 1)
                .unwrap_or(0);
            lines[start..]
                .iter()
                .take_while(|x| x.number <= hi)
                .filter(|x| x.number >= lo)
                .map(|x| {
                    format!(
                        "{}{}{}",
                        x.number,
                        if x.is_match { ":" } else { "-" },
                        x.text
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        out.push(SearchMatch {
            path: path.to_owned(),
            line: Some(l.number),
            snippet,
        });
    }
    out
}

fn name_search(
    args: &SearchFilesArgs,
    mut wb: WalkBuilder,
    root: &Path,
    max: usize,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<SearchFilesResult, ErrorPayload> {
    let q = &args.query;
    let is_glob = q.contains(['*', '?', '[', '{']);
    let case_sensitive = args
        .case_sensitive
        .unwrap_or_else(|| q.chars().any(char::is_uppercase));
    let glob = if is_glob {
        let g = globset::GlobBuilder::new(q)
            .case_insensitive(!case_sensitive)
            .literal_separator(false)
            .build()
            .map_err(|e| invalid("query", format!("bad glob: {e}")))?
            .compile_matcher();
        Some(g)
    } else {
        None
    };
    let needle = if case_sensitive {
        q.clone()
    } else {
        q.to_lowercase()
    };
    wb.sort_by_file_name(|a, b| a.cmp(b));
    let mut matches = Vec::new();
    let mut files = 0u64;
    let mut truncated = false;
    for entry in wb.build() {
        if cancel.is_cancelled() {
            return Err(ErrorPayload::new(
                ErrorCode::Interrupted,
                "the search was cancelled",
            ));
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        files += 1;
        let rel = display(root, entry.path());
        let name = entry.file_name().to_string_lossy();
        let hit = match &glob {
            Some(g) => g.is_match(name.as_ref()) || (q.contains('/') && g.is_match(&rel)),
            None => {
                if case_sensitive {
                    name.contains(needle.as_str())
                } else {
                    name.to_lowercase().contains(needle.as_str())
                }
            }
        };
        if hit {
            if matches.len() >= max {
                truncated = true;
                break;
            }
            let suffix = if entry.file_type().is_some_and(|t| t.is_dir()) {
                "/"
            } else {
                ""
            };
            matches.push(SearchMatch {
                path: rel.clone(),
                line: None,
                snippet: format!("{rel}{suffix}"),
            });
        }
    }
    matches.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(SearchFilesResult {
        matches,
        truncated,
        files_searched: files,
    })
}
