//! Parsing a line with brush-parser, salvaging what does not parse, and analysing a
//! whole script.

use super::*;

pub(super) fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion: true,
    }
}

/// Longest command line that is parsed at all.
pub(super) const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// Deepest bracket nesting that is parsed at all (the parser recurses per level).
pub(super) const MAX_NESTING: usize = 32;

/// Whether the line is small and shallow enough to hand to the parser without risking
/// its stack.
pub(super) fn parseable_size(command: &str) -> bool {
    if command.len() > MAX_COMMAND_BYTES {
        return false;
    }
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut backticks = 0usize;
    for c in command.chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => backticks += 1,
            _ => {}
        }
        max = max.max(depth);
    }
    max <= MAX_NESTING && backticks <= 2 * MAX_NESTING
}

/// Parses a command line. A line the parser rejects is tried again with its
/// here-document delimiters unquoted (`<<'EOF'` → `<<EOF`; the parser rejects some
/// quoted delimiters inside substitutions), which only makes the analysis look at
/// more expansions.
pub(super) fn parse(command: &str) -> Option<ast::Program> {
    parse_exact(command).or_else(|| {
        let unquoted = unquote_heredoc_delimiters(command)?;
        parse_exact(&unquoted)
    })
}

/// `<<'EOF'`, `<<"EOF"`, `<<\EOF` → `<<EOF`; `None` when there is none.
pub(super) fn unquote_heredoc_delimiters(command: &str) -> Option<String> {
    let mut out = String::with_capacity(command.len());
    let mut rest = command;
    let mut changed = false;
    // Quoted delimiters met, as written (`'EOF'`): a terminator line written the same
    // way (the parser re-quotes it inside substitutions) is unquoted too.
    let mut quoted: Vec<(String, String)> = Vec::new();
    while let Some(pos) = rest.find("<<") {
        let (before, after) = rest.split_at(pos + 2);
        out.push_str(before);
        let after = if let Some(a) = after.strip_prefix('-') {
            out.push('-');
            a
        } else {
            after
        };
        let trimmed = after.trim_start_matches([' ', '\t']);
        out.push_str(&after[..after.len() - trimmed.len()]);
        let mut chars = trimmed.chars();
        match chars.next() {
            Some(q @ ('\'' | '"')) => match chars.as_str().find(q) {
                Some(end) => {
                    let delim = &chars.as_str()[..end];
                    quoted.push((format!("{q}{delim}{q}"), delim.to_owned()));
                    out.push_str(delim);
                    rest = &chars.as_str()[end + 1..];
                    changed = true;
                }
                None => rest = trimmed,
            },
            Some('\\') => {
                rest = chars.as_str();
                changed = true;
            }
            _ => rest = trimmed,
        }
    }
    out.push_str(rest);
    if !changed {
        return None;
    }
    if quoted.is_empty() {
        return Some(out);
    }
    let lines: Vec<&str> = out
        .split('\n')
        .map(|line| {
            quoted
                .iter()
                .find(|(q, _)| line.trim() == q)
                .map_or(line, |(_, d)| d.as_str())
        })
        .collect();
    Some(lines.join("\n"))
}

/// For a line that does not parse: the pieces between its operators, brackets and
/// newlines (outside quotes) that parse alone are analysed, and a destructive one makes
/// the whole line destructive, so a parser gap cannot turn `rm -rf /` into an "ask".
pub(super) fn salvage(script: &str, ctx: &Ctx<'_>, acc: &mut Acc) {
    // Pieces between every operator, and pieces that keep their pipes (`echo … | sh`).
    let pieces = salvage_pieces(script, true)
        .into_iter()
        .take(256)
        .chain(salvage_pieces(script, false).into_iter().take(256));
    for piece in pieces {
        let mut sub = Acc::new();
        if parse_exact(&piece).is_some() && analyze_script(&piece, &ctx.nested(), &mut sub, None) {
            let f = sub.finding("");
            if f.destructive {
                acc.add(f.within("a part of the command"));
                return;
            }
        }
    }
}

/// Splits at unquoted `;`, `&`, brackets, backquotes, newlines and (with `pipes`) `|`,
/// and drops the keywords that open a clause (`then`, `do`, …).
pub(super) fn salvage_pieces(script: &str, pipes: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = script.chars();
    let mut push = |cur: &mut String| {
        let mut piece = cur.trim();
        loop {
            let before = piece;
            for kw in [
                "then", "do", "else", "elif", "if", "while", "until", "!", "time",
            ] {
                if let Some(rest) = piece.strip_prefix(kw) {
                    if rest.starts_with([' ', '\t']) {
                        piece = rest.trim_start();
                    }
                }
            }
            if piece == before {
                break;
            }
        }
        if !piece.is_empty() && piece != "$" {
            out.push(piece.trim_end_matches('$').to_owned());
        }
        cur.clear();
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (Some('"') | None, '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (None, '|') if !pipes => cur.push(c),
            (None, ';' | '|' | '&' | '(' | ')' | '{' | '}' | '`' | '\n') => push(&mut cur),
            (_, c) => cur.push(c),
        }
    }
    push(&mut cur);
    out
}

pub(super) fn parse_exact(command: &str) -> Option<ast::Program> {
    if !parseable_size(command) || has_huge_io_number(command) {
        return None;
    }
    let opts = parser_options();
    let mut parser = brush_parser::Parser::new(
        std::io::BufReader::new(command.as_bytes()),
        &opts,
        &brush_parser::SourceInfo::default(),
    );
    guarded(|| parser.parse_program().ok()).flatten()
}

/// Runs the parser, turning a panic inside it into `None` (the line is then
/// unparseable, so high risk and never allowed without a person). The parser is a
/// dependency; its known panics are also avoided up front ([`has_huge_io_number`]).
pub(super) fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Whether the line has a file-descriptor number too large for the parser, which
/// panics on it (`99999999999>x`; found by fuzzing).
pub(super) fn has_huge_io_number(command: &str) -> bool {
    let bytes = command.as_bytes();
    let mut run = 0usize;
    for &b in bytes {
        if b.is_ascii_digit() {
            run += 1;
        } else {
            if run >= 10 && (b == b'<' || b == b'>') {
                return true;
            }
            run = 0;
        }
    }
    false
}

/// Analyses a script; returns whether it parsed. `parts` collects the top-level
/// simple commands when the script is a plain list (cleared otherwise).
pub(super) fn analyze_script(
    script: &str,
    ctx: &Ctx<'_>,
    acc: &mut Acc,
    mut parts: Option<&mut Vec<CommandPart>>,
) -> bool {
    if ctx.depth > MAX_DEPTH {
        acc.add(Finding::too_deep(
            "the command nests shells or substitutions too deeply to analyse",
        ));
        return false;
    }
    if looks_like_fork_bomb(script) {
        acc.add(Finding::destructive("a fork bomb"));
    }
    let Some(program) = parse(script) else {
        acc.add(Finding::unverifiable(
            "the command could not be parsed, so it cannot be checked",
        ));
        salvage(script, ctx, acc);
        if let Some(p) = parts.as_deref_mut() {
            p.clear();
        }
        return false;
    };
    // `((` opens an arithmetic command or two subshells (bash decides by trying); the
    // parser always reads arithmetic and may drop what follows, so the subshell reading
    // is analysed too.
    if script.contains("((") && script.replace("$((", "").contains("((") {
        // `$((` stays arithmetic expansion.
        let spaced = script
            .replace("$((", "\u{0}")
            .replace("((", "( (")
            .replace('\u{0}', "$((");
        let mut sub = Acc::new();
        if parse_exact(&spaced).is_some() && analyze_script(&spaced, &ctx.nested(), &mut sub, None)
        {
            acc.add(sub.finding("uses `((`").unsafe_());
        }
    }
    let mut plain = true;
    let mut collected = Vec::new();
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            if matches!(sep, ast::SeparatorOperator::Async) {
                acc.make_unsafe("runs a command in the background");
                plain = false;
            }
            for pipeline in
                std::iter::once(&and_or.first).chain(and_or.additional.iter().map(|a| match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                }))
            {
                // `time cmd` is harmless; the commands still count.
                for (k, cmd) in pipeline.seq.iter().enumerate() {
                    let stdin = piped_stdin(&pipeline.seq, k, ctx);
                    ctx.with_stdin(stdin, || match cmd {
                        ast::Command::Simple(sc) => {
                            let part = analyze_simple(sc, ctx, acc);
                            collected.push(part);
                        }
                        other => {
                            plain = false;
                            analyze_command(other, ctx, acc);
                        }
                    });
                }
            }
        }
    }
    if let Some(p) = parts {
        if plain {
            *p = collected;
        } else {
            p.clear();
        }
    }
    true
}

/// The literal words of a simple command (`None` when any word is computed).
pub(super) fn literal_words(sc: &ast::SimpleCommand, ctx: &Ctx<'_>) -> Option<Vec<String>> {
    let mut scratch = Acc::new();
    let mut out = vec![word_info(&sc.word_or_name.as_ref()?.value, ctx, &mut scratch).literal?];
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        if let ast::CommandPrefixOrSuffixItem::Word(w) = item {
            out.push(word_info(&w.value, ctx, &mut scratch).literal?);
        }
    }
    Some(out)
}

/// The script an `echo`/`printf` with literal arguments feeds into a pipe.
pub(super) fn echoed_script(cmd: &ast::Command, ctx: &Ctx<'_>) -> Option<String> {
    let ast::Command::Simple(sc) = cmd else {
        return None;
    };
    let words = literal_words(sc, ctx)?;
    match basename(words.first()?) {
        "echo" => Some(
            words[1..]
                .iter()
                .filter(|w| !matches!(w.as_str(), "-n" | "-e" | "-E"))
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "printf" => Some(words[1..].join(" ").replace("\\n", "\n")),
        _ => None,
    }
}

/// The standard input of the `k`-th command of a pipeline: the caller's for the first,
/// the literal text of an `echo`/`printf` before it, or computed output.
pub(super) fn piped_stdin(seq: &[ast::Command], k: usize, ctx: &Ctx<'_>) -> Stdin {
    if k == 0 {
        return ctx.stdin();
    }
    match echoed_script(&seq[k - 1], ctx) {
        Some(text) => Stdin::Text(text),
        None => Stdin::Computed,
    }
}

pub(super) fn looks_like_fork_bomb(script: &str) -> bool {
    let compact: String = script.chars().filter(|c| !c.is_whitespace()).collect();
    compact.contains(":(){:|:&};:") || compact.contains("(){$0|$0&}") || compact.contains("$0&$0")
}
