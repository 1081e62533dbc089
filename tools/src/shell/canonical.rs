//! The canonical form of a command line (rule matching and approval keys).

use super::*;

/// Quotes a word the canonical way: bare when it only has safe characters, single
/// quotes otherwise.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,^*?[]~".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The canonical form of a command line: each simple command with literal words,
/// harmless leading `VAR=value` assignments dropped and quoting normalised, joined by
/// its operators. `None` when the line does not parse.
pub fn canonical_command(command: &str) -> Option<String> {
    let program = parse(command)?;
    let policy = ShellPolicy::default();
    let ctx = Ctx {
        root: PathBuf::from("/"),
        cwd: RefCell::new(PathBuf::from("/")),
        policy: &policy,
        depth: 0,
        seen: Rc::default(),
        wraps: Cell::new(0),
        stdin: RefCell::new(Stdin::Terminal),
    };
    let mut out = String::new();
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            let mut pipes = vec![(None, &and_or.first)];
            pipes.extend(and_or.additional.iter().map(|a| match a {
                ast::AndOr::And(p) => (Some("&&"), p),
                ast::AndOr::Or(p) => (Some("||"), p),
            }));
            for (op, pipeline) in pipes {
                if let Some(op) = op {
                    out.push_str(&format!(" {op} "));
                }
                if pipeline.bang {
                    out.push_str("! ");
                }
                let mut first = true;
                for cmd in &pipeline.seq {
                    if !first {
                        out.push_str(" | ");
                    }
                    first = false;
                    match cmd {
                        ast::Command::Simple(sc) => {
                            let mut scratch = Acc::new();
                            let part = analyze_simple(sc, &ctx, &mut scratch);
                            out.push_str(&part.canonical);
                        }
                        other => out.push_str(&normalize_ws(&other.to_string())),
                    }
                }
            }
            match sep {
                ast::SeparatorOperator::Async => out.push_str(" &"),
                ast::SeparatorOperator::Sequence => out.push_str(" ;"),
            }
            out.push(' ');
        }
    }
    let trimmed = out.trim().trim_end_matches(';').trim().to_owned();
    // `bash -lc 'cargo test'` is the same call as `cargo test`.
    if let Some(script) = single_shell_script(&program) {
        if let Some(inner) = canonical_command(&script) {
            return Some(inner);
        }
    }
    Some(trimmed)
}

/// The script of a line that is exactly `sh -c SCRIPT` (or `bash -lc`, …).
pub(super) fn single_shell_script(program: &ast::Program) -> Option<String> {
    let [list] = program.complete_commands.as_slice() else {
        return None;
    };
    let [ast::CompoundListItem(and_or, ast::SeparatorOperator::Sequence)] = list.0.as_slice()
    else {
        return None;
    };
    if !and_or.additional.is_empty() || and_or.first.bang {
        return None;
    }
    let [ast::Command::Simple(sc)] = and_or.first.seq.as_slice() else {
        return None;
    };
    if sc.prefix.is_some()
        && sc.prefix.as_ref().is_some_and(|p| {
            p.0.iter()
                .any(|i| !matches!(i, ast::CommandPrefixOrSuffixItem::AssignmentWord(..)))
        })
    {
        return None;
    }
    let name = basename(&sc.word_or_name.as_ref()?.value).to_owned();
    if !SHELLS.contains(&name.as_str()) {
        return None;
    }
    let suffix = sc.suffix.as_ref()?;
    let words: Vec<&ast::Word> = suffix
        .0
        .iter()
        .map(|i| match i {
            ast::CommandPrefixOrSuffixItem::Word(w) => Some(w),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let [flag, script] = words.as_slice() else {
        return None;
    };
    if !(flag.value.starts_with('-')
        && flag.value.ends_with('c')
        && flag.value.chars().skip(1).all(|c| c.is_ascii_alphabetic()))
    {
        return None;
    }
    let pieces = guarded(|| brush_parser::word::parse(&script.value, &parser_options()))?.ok()?;
    let mut out = String::new();
    let policy = ShellPolicy::default();
    let ctx = Ctx {
        root: PathBuf::from("/"),
        cwd: RefCell::new(PathBuf::from("/")),
        policy: &policy,
        depth: 0,
        seen: Rc::default(),
        wraps: Cell::new(0),
        stdin: RefCell::new(Stdin::Terminal),
    };
    let mut scratch = Acc::new();
    for p in &pieces {
        if !piece_literal(&p.piece, &script.value, &ctx, &mut scratch, &mut out) {
            return None;
        }
    }
    Some(out)
}

/// A shell variable name.
pub(super) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub(super) fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}
