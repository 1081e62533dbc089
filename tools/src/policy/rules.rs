//! Allow and deny rules: parsing, and matching them against the analysis of a call.

use super::*;

pub(super) fn glob_match(pattern: &str, rel: &str) -> bool {
    match globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher().is_match(rel),
        Err(_) => false,
    }
}

pub(super) fn part_matches(pattern: &str, canonical_part: &str) -> bool {
    // The canonical part is quoted; split it back into words with the shell parser's
    // rules by re-analysing it as words.
    let words = split_words(canonical_part);
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    shell::pattern_matches(pattern, &refs, true)
}

/// Whether a deny pattern matches one canonical command. A computed word may expand to
/// anything, so from the first one on the rule is taken to match: `rm "$f"` hits
/// `run_shell(rm *)`, and `$CMD x` hits every shell deny rule.
pub(super) fn deny_matches(pattern: &str, canonical: &str) -> bool {
    let words = split_words(canonical);
    let Some(k) = words.iter().position(|w| w == shell::COMPUTED_WORD) else {
        return part_matches(pattern, canonical);
    };
    let pat: Vec<&str> = pattern.split_whitespace().collect();
    for (i, w) in words[..k].iter().enumerate() {
        let Some(p) = pat.get(i) else {
            return false;
        };
        if i + 1 == pat.len() && p.ends_with('*') {
            return w.starts_with(&p[..p.len() - 1]);
        }
        let fits = if p.starts_with('<') && p.ends_with('>') {
            !w.starts_with('-')
        } else {
            p == w
        };
        if !fits {
            return false;
        }
    }
    true
}

pub(super) fn split_words(canonical: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut has = false;
    let mut chars = canonical.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_quote = !in_quote;
                has = true;
            }
            '\\' if !in_quote => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c if c.is_whitespace() && !in_quote => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether an allow rule (or set of them) allows the call.
pub(super) fn allowed_by_rules(tool: &str, a: &Assessment, rules: &[Rule]) -> Option<String> {
    let mine: Vec<&Rule> = rules.iter().filter(|r| r.tool == tool).collect();
    if mine.is_empty() {
        return None;
    }
    match &a.target {
        Target::Outside => None,
        Target::Bare => mine
            .iter()
            .find(|r| r.pattern.as_deref().is_none_or(|p| p == "*"))
            .map(|r| rule_text(r)),
        Target::Path(rel) => mine
            .iter()
            .find(|r| r.pattern.as_deref().is_none_or(|p| glob_match(p, rel)))
            .map(|r| rule_text(r)),
        Target::Git(words) => {
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            mine.iter()
                .find(|r| {
                    r.pattern
                        .as_deref()
                        .is_none_or(|p| shell::pattern_matches(p, &refs, true))
                })
                .map(|r| rule_text(r))
        }
        Target::Shell(an) => {
            if let Some(r) = mine.iter().find(|r| r.pattern.is_none()) {
                return Some(rule_text(r));
            }
            if !an.parsed || an.parts.is_empty() {
                return None;
            }
            let mut used = None;
            for part in &an.parts {
                if part.safe {
                    continue;
                }
                if !part.ruleable {
                    return None;
                }
                let hit = mine.iter().find(|r| {
                    r.pattern
                        .as_deref()
                        .is_some_and(|p| part_matches(p, &part.canonical))
                })?;
                used = Some(rule_text(hit));
            }
            // Every part is low risk or covered by a rule; substitutions and redirections
            // already made their part non-ruleable.
            used
        }
    }
}

pub(super) fn denied_by_rules(tool: &str, a: &Assessment, rules: &[Rule]) -> Option<String> {
    let mine: Vec<&Rule> = rules.iter().filter(|r| r.tool == tool).collect();
    if mine.is_empty() {
        return None;
    }
    if let Some(r) = mine.iter().find(|r| r.pattern.is_none()) {
        return Some(rule_text(r));
    }
    match &a.target {
        Target::Outside | Target::Bare => None,
        Target::Path(rel) => mine
            .iter()
            .find(|r| r.pattern.as_deref().is_some_and(|p| glob_match(p, rel)))
            .map(|r| rule_text(r)),
        Target::Git(words) => {
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            mine.iter()
                .find(|r| {
                    r.pattern
                        .as_deref()
                        .is_some_and(|p| shell::pattern_matches(p, &refs, true))
                })
                .map(|r| rule_text(r))
        }
        Target::Shell(an) => {
            for cmd in &an.commands {
                if let Some(r) = mine
                    .iter()
                    .find(|r| r.pattern.as_deref().is_some_and(|p| deny_matches(p, cmd)))
                {
                    return Some(rule_text(r));
                }
            }
            None
        }
    }
}

pub(super) fn rule_text(r: &Rule) -> String {
    match &r.pattern {
        Some(p) => format!("{}({p})", r.tool),
        None => r.tool.clone(),
    }
}

pub(super) fn parse_rules(texts: &[String]) -> Vec<Rule> {
    texts.iter().filter_map(|t| Rule::parse(t)).collect()
}
