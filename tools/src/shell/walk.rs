//! Walking the syntax tree: lists, pipelines, compound commands, words, redirections
//! and simple commands.

use super::*;

pub(super) fn analyze_compound_list(list: &ast::CompoundList, ctx: &Ctx<'_>, acc: &mut Acc) {
    for ast::CompoundListItem(and_or, _) in &list.0 {
        for pipeline in
            std::iter::once(&and_or.first).chain(and_or.additional.iter().map(|a| match a {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            }))
        {
            for (k, cmd) in pipeline.seq.iter().enumerate() {
                let stdin = piped_stdin(&pipeline.seq, k, ctx);
                ctx.with_stdin(stdin, || analyze_command(cmd, ctx, acc));
            }
        }
    }
}

pub(super) fn analyze_command(cmd: &ast::Command, ctx: &Ctx<'_>, acc: &mut Acc) {
    match cmd {
        ast::Command::Simple(sc) => {
            analyze_simple(sc, ctx, acc);
        }
        ast::Command::Compound(cc, redirects) => {
            acc.make_unsafe("uses a compound command (subshell, group, loop or conditional)");
            analyze_compound(cc, ctx, acc);
            if let Some(r) = redirects {
                for io in &r.0 {
                    analyze_redirect(io, ctx, acc);
                }
            }
        }
        ast::Command::Function(def) => {
            acc.make_unsafe("defines a shell function");
            if calls_name(&def.body.0, &def.fname) {
                acc.add(Finding::destructive(
                    "a fork bomb (a function that calls itself)",
                ));
            }
            analyze_compound(&def.body.0, ctx, acc);
        }
        ast::Command::ExtendedTest(e) => {
            acc.make_unsafe("uses an extended test expression");
            analyze_test_expr(e, ctx, acc);
        }
    }
}

pub(super) fn analyze_compound(cc: &ast::CompoundCommand, ctx: &Ctx<'_>, acc: &mut Acc) {
    match cc {
        ast::CompoundCommand::BraceGroup(ast::BraceGroupCommand(l))
        | ast::CompoundCommand::Subshell(ast::SubshellCommand(l)) => {
            analyze_compound_list(l, ctx, acc)
        }
        ast::CompoundCommand::ForClause(f) => {
            for w in f.values.iter().flatten() {
                word_info(&w.value, ctx, acc);
            }
            analyze_compound_list(&f.body.0, ctx, acc);
        }
        ast::CompoundCommand::ArithmeticForClause(f) => {
            for e in [&f.initializer, &f.condition, &f.updater]
                .into_iter()
                .flatten()
            {
                word_info(&e.value, ctx, acc);
            }
            analyze_compound_list(&f.body.0, ctx, acc)
        }
        ast::CompoundCommand::CaseClause(c) => {
            word_info(&c.value.value, ctx, acc);
            for item in &c.cases {
                for p in &item.patterns {
                    word_info(&p.value, ctx, acc);
                }
                if let Some(l) = &item.cmd {
                    analyze_compound_list(l, ctx, acc);
                }
            }
        }
        ast::CompoundCommand::IfClause(i) => {
            analyze_compound_list(&i.condition, ctx, acc);
            analyze_compound_list(&i.then, ctx, acc);
            for e in i.elses.iter().flatten() {
                if let Some(c) = &e.condition {
                    analyze_compound_list(c, ctx, acc);
                }
                analyze_compound_list(&e.body, ctx, acc);
            }
        }
        ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
            analyze_compound_list(&w.0, ctx, acc);
            analyze_compound_list(&(w.1).0, ctx, acc);
        }
        ast::CompoundCommand::Arithmetic(a) => {
            // `(( $(cmd) ))` runs the substitution; `((cmd) )` may also be meant as
            // nested subshells, so the text is analysed as commands too.
            word_info(&a.expr.value, ctx, acc);
            let mut sub = Acc::new();
            if analyze_script(&a.expr.value, &ctx.nested(), &mut sub, None) {
                acc.add(sub.finding("uses an arithmetic command").unsafe_());
            }
        }
    }
}

pub(super) fn analyze_test_expr(e: &ast::ExtendedTestExpr, ctx: &Ctx<'_>, acc: &mut Acc) {
    match e {
        ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
            analyze_test_expr(a, ctx, acc);
            analyze_test_expr(b, ctx, acc);
        }
        ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
            analyze_test_expr(a, ctx, acc)
        }
        ast::ExtendedTestExpr::UnaryTest(_, w) => {
            word_info(&w.value, ctx, acc);
        }
        ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
            word_info(&a.value, ctx, acc);
            word_info(&b.value, ctx, acc);
        }
    }
}

/// Whether a compound command calls `name` anywhere (for fork-bomb detection).
pub(super) fn calls_name(cc: &ast::CompoundCommand, name: &str) -> bool {
    // The display form is good enough: look for the name as a whole word.
    let text = cc.to_string();
    text.split(|c: char| {
        c.is_whitespace()
            || c == '|'
            || c == '&'
            || c == ';'
            || c == '('
            || c == ')'
            || c == '{'
            || c == '}'
    })
    .any(|w| w == name)
}

/// What a word expands to.
pub(super) struct WordInfo {
    /// The literal value, when the word has no expansion.
    pub(super) literal: Option<String>,
}

pub(super) fn word_info(raw: &str, ctx: &Ctx<'_>, acc: &mut Acc) -> WordInfo {
    let Some(Ok(pieces)) = guarded(|| brush_parser::word::parse(raw, &parser_options())) else {
        acc.add(Finding::unverifiable(
            "a word of the command could not be parsed",
        ));
        return WordInfo { literal: None };
    };
    let mut out = String::new();
    let mut literal = true;
    for p in &pieces {
        literal &= piece_literal(&p.piece, raw, ctx, acc, &mut out);
    }
    WordInfo {
        literal: literal.then_some(out),
    }
}

/// Appends the literal text of `piece` to `out`; returns whether it is literal.
/// Substitutions are analysed; `raw` is the whole word, salvaged when a substitution
/// inside it does not parse.
pub(super) fn piece_literal(
    piece: &WordPiece,
    raw: &str,
    ctx: &Ctx<'_>,
    acc: &mut Acc,
    out: &mut String,
) -> bool {
    match piece {
        WordPiece::Text(t) | WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => {
            out.push_str(t);
            true
        }
        WordPiece::EscapeSequence(e) => {
            out.push_str(e.strip_prefix('\\').unwrap_or(e));
            true
        }
        WordPiece::TildePrefix(t) => {
            out.push('~');
            out.push_str(t);
            true
        }
        WordPiece::DoubleQuotedSequence(seq) | WordPiece::GettextDoubleQuotedSequence(seq) => {
            let mut ok = true;
            for p in seq {
                ok &= piece_literal(&p.piece, raw, ctx, acc, out);
            }
            ok
        }
        WordPiece::ParameterExpansion(_) => {
            acc.make_unsafe("expands a variable, so the final command is not known");
            false
        }
        WordPiece::CommandSubstitution(script)
        | WordPiece::BackquotedCommandSubstitution(script) => {
            acc.make_unsafe("uses command substitution");
            let inner = ctx.nested();
            let mut sub = Acc::new();
            let script = match piece {
                WordPiece::BackquotedCommandSubstitution(_) => unescape_backquoted(script),
                _ => script.clone(),
            };
            if !analyze_script(&script, &inner, &mut sub, None) {
                // The parser may have cut the substitution short (`$(case x in a) …`):
                // look at the whole word.
                salvage(raw, ctx, &mut sub);
            }
            sub.safe = false;
            acc.add(Finding {
                risk: sub.risk.max(RiskLevel::Medium),
                safe: false,
                destructive: sub.destructive,
                network: sub.network,
                elevated: sub.elevated,
                needs_approval: sub.needs_approval,
                reason: sub
                    .reason
                    .map(|r| r.1)
                    .unwrap_or_else(|| "uses command substitution".to_owned()),
            });
            false
        }
        WordPiece::ArithmeticExpression(e) => {
            if e.value.contains("$(") || e.value.contains('`') {
                acc.make_unsafe("uses command substitution inside arithmetic");
                let inner = ctx.nested();
                let mut sub = Acc::new();
                word_info(&e.value, &inner, &mut sub);
                acc.add(Finding {
                    risk: sub.risk,
                    safe: false,
                    destructive: sub.destructive,
                    network: sub.network,
                    elevated: sub.elevated,
                    needs_approval: sub.needs_approval,
                    reason: sub.reason.map(|r| r.1).unwrap_or_default(),
                });
            } else {
                acc.make_unsafe("uses arithmetic expansion");
            }
            false
        }
    }
}

/// Inside backquotes a backslash before `\\` or `$` is removed (the parser already
/// removes it before a backquote).
pub(super) fn unescape_backquoted(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('\\' | '$')) {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn analyze_redirect(io: &ast::IoRedirect, ctx: &Ctx<'_>, acc: &mut Acc) -> bool {
    // Returns whether the redirection writes a file.
    match io {
        ast::IoRedirect::File(_, kind, target) => {
            let writes = matches!(
                kind,
                ast::IoFileRedirectKind::Write
                    | ast::IoFileRedirectKind::Append
                    | ast::IoFileRedirectKind::Clobber
                    | ast::IoFileRedirectKind::ReadAndWrite
            );
            match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let info = word_info(&w.value, ctx, acc);
                    if writes {
                        if let Some(p) = names_secret(&w.value, ctx) {
                            acc.add(Finding::outside_high(format!(
                                "uses {p}, a well-known secret location"
                            )));
                        }
                        return redirect_write(info.literal.as_deref(), ctx, acc);
                    }
                    if let Some(p) = names_secret(&w.value, ctx) {
                        acc.add(Finding::outside_high(format!(
                            "uses {p}, a well-known secret location"
                        )));
                    } else if let Some(t) = info.literal.as_deref() {
                        if !t.starts_with("/dev/") && !path_inside(t, ctx) {
                            acc.add(Finding::outside(format!(
                                "reads {t}, outside the workspace"
                            )));
                        }
                    }
                    false
                }
                ast::IoFileRedirectTarget::Fd(_) | ast::IoFileRedirectTarget::Duplicate(_) => false,
                ast::IoFileRedirectTarget::ProcessSubstitution(_, ast::SubshellCommand(l)) => {
                    acc.make_unsafe("uses process substitution");
                    let inner = ctx.nested();
                    analyze_compound_list(l, &inner, acc);
                    true
                }
            }
        }
        ast::IoRedirect::OutputAndError(w, _) => {
            let info = word_info(&w.value, ctx, acc);
            redirect_write(info.literal.as_deref(), ctx, acc)
        }
        ast::IoRedirect::HereDocument(_, doc) => {
            if doc.requires_expansion {
                word_info(&doc.doc.value, ctx, acc);
            }
            false
        }
        ast::IoRedirect::HereString(_, w) => {
            word_info(&w.value, ctx, acc);
            false
        }
    }
}

/// A redirection writes to `target`; returns whether it writes a real file.
pub(super) fn redirect_write(target: Option<&str>, ctx: &Ctx<'_>, acc: &mut Acc) -> bool {
    match target {
        Some("/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty") => false,
        Some(t) if t.starts_with("/dev/fd/") => false,
        Some(t) if t.starts_with("/dev/") => {
            acc.add(Finding::destructive(format!(
                "writes directly to the device {t}"
            )));
            true
        }
        Some(t) => {
            if path_inside(t, ctx) {
                acc.add(Finding::medium(format!(
                    "redirects output into the file {t}"
                )));
            } else {
                acc.add(Finding::outside_high(format!(
                    "redirects output to {t}, outside the workspace"
                )));
            }
            true
        }
        None => {
            acc.add(Finding::high(
                "redirects output to a file whose name is computed at run time",
            ));
            true
        }
    }
}

/// Whether `target` (a literal path in the command) stays inside the workspace.
pub(super) fn path_inside(target: &str, ctx: &Ctx<'_>) -> bool {
    if target.starts_with('~') {
        return false;
    }
    match jail::resolve_from(&ctx.root, &ctx.cwd.borrow(), target) {
        Ok(r) => r.inside,
        Err(_) => false,
    }
}

/// Programs whose arguments are text, not files to open.
pub(super) const NOT_READING: &[&str] = &[
    "echo", "printf", "which", "type", "whereis", "basename", "dirname", "seq", "sleep", "true",
    "false", "expr", "test", "[",
];

/// Whether `word` (as written: `~/.ssh/x`, `$HOME/.aws`, `/etc/shadow`) names a secret
/// location outside the workspace.
pub(super) fn names_secret(word: &str, ctx: &Ctx<'_>) -> Option<String> {
    let unquoted: String = word.chars().filter(|c| *c != '"' && *c != '\'').collect();
    for cand in secrets::path_candidates(&unquoted) {
        let cand = cand
            .strip_prefix("${HOME}")
            .or_else(|| cand.strip_prefix("$HOME"))
            .map(|rest| format!("~{rest}"))
            .unwrap_or_else(|| cand.to_owned());
        if secrets::is_secret_path(&cand) && !path_inside(&cand, ctx) {
            return Some(cand);
        }
    }
    None
}

/// Reading a well-known secret location, by any program: high, and it needs an
/// approval.
pub(super) fn secret_arguments(
    sc: &ast::SimpleCommand,
    argv: &[Option<String>],
    ctx: &Ctx<'_>,
) -> Option<Finding> {
    if lit(argv, 0).is_some_and(|p| NOT_READING.contains(&basename(p))) {
        return None;
    }
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        let raw = match item {
            ast::CommandPrefixOrSuffixItem::Word(w)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => &w.value,
            _ => continue,
        };
        if let Some(p) = names_secret(raw, ctx) {
            return Some(Finding::outside_high(format!(
                "uses {p}, a well-known secret location"
            )));
        }
    }
    None
}

pub(super) fn analyze_simple(sc: &ast::SimpleCommand, ctx: &Ctx<'_>, acc: &mut Acc) -> CommandPart {
    let mut local = Acc::new();
    let mut argv: Vec<Option<String>> = Vec::new();
    let mut kept_assignments: Vec<String> = Vec::new();
    let mut writes = false;
    // Prefix: assignments and redirections.
    for item in sc.prefix.iter().flat_map(|p| p.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assign, word) => {
                let name = match &assign.name {
                    ast::AssignmentName::VariableName(n) => n.clone(),
                    ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                };
                let value = match &assign.value {
                    ast::AssignmentValue::Scalar(w) => word_info(&w.value, ctx, &mut local).literal,
                    ast::AssignmentValue::Array(_) => None,
                };
                if dangerous_env(&name) {
                    local.add(Finding::hijack(&name));
                    kept_assignments.push(word.value.clone());
                } else if value.is_none() {
                    // A computed value is still only an environment variable.
                }
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                writes |= analyze_redirect(io, ctx, &mut local)
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, ast::SubshellCommand(l)) => {
                local.make_unsafe("uses process substitution");
                let inner = ctx.nested();
                analyze_compound_list(l, &inner, &mut local);
            }
            ast::CommandPrefixOrSuffixItem::Word(_) => {}
        }
    }
    if let Some(w) = &sc.word_or_name {
        argv.push(word_info(&w.value, ctx, &mut local).literal);
    }
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                argv.push(word_info(&w.value, ctx, &mut local).literal)
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assign, w) => {
                // `export PATH=/tmp:$PATH`, `declare -x LD_PRELOAD=…`.
                let name = match &assign.name {
                    ast::AssignmentName::VariableName(n)
                    | ast::AssignmentName::ArrayElementName(n, _) => n,
                };
                if dangerous_env(name) {
                    local.add(Finding::hijack(name));
                }
                argv.push(word_info(&w.value, ctx, &mut local).literal)
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                writes |= analyze_redirect(io, ctx, &mut local)
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, ast::SubshellCommand(l)) => {
                local.make_unsafe("uses process substitution");
                argv.push(None);
                let inner = ctx.nested();
                analyze_compound_list(l, &inner, &mut local);
            }
        }
    }
    let substitutions_ok = local.safe;
    // `bash <<< 'script'`, `at now <<EOF … EOF`, `python3 < x.py`: what the command
    // reads on standard input (the last input redirection wins over a pipe).
    let mut stdin = None;
    for item in sc
        .prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .chain(sc.suffix.iter().flat_map(|s| s.0.iter()))
    {
        let ast::CommandPrefixOrSuffixItem::IoRedirect(io) = item else {
            continue;
        };
        match io {
            ast::IoRedirect::HereString(fd, w) if fd.is_none_or(|f| f == 0) => {
                let mut scratch = Acc::new();
                stdin = Some(match word_info(&w.value, ctx, &mut scratch).literal {
                    Some(t) => Stdin::Text(t),
                    None => Stdin::Computed,
                });
            }
            ast::IoRedirect::HereDocument(fd, doc) if fd.is_none_or(|f| f == 0) => {
                stdin = Some(Stdin::Text(doc.doc.value.clone()));
            }
            ast::IoRedirect::File(
                fd,
                ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite,
                _,
            ) if fd.is_none_or(|f| f == 0) => stdin = Some(Stdin::File),
            _ => {}
        }
    }
    if let Some(f) = secret_arguments(sc, &argv, ctx) {
        local.add(f);
    }
    if argv.is_empty() {
        // Only assignments or redirections: `FOO=1` or `> file`.
        if !writes && local.risk == RiskLevel::Low {
            local.add(Finding::low("sets a shell variable"));
        }
    } else {
        let stdin = stdin.unwrap_or_else(|| ctx.stdin());
        local.add(ctx.with_stdin(stdin, || classify_argv(&argv, ctx)));
    }
    let literal_words: Option<Vec<String>> = argv.iter().cloned().collect();
    let mut env_assignments = Vec::new();
    let canonical = {
        let mut words: Vec<String> = kept_assignments.clone();
        match &literal_words {
            Some(ws) => {
                let (assigns, rest) = strip_transparent(ws);
                env_assignments = assigns;
                words.extend(env_assignments.iter().cloned());
                words.extend(rest.iter().map(|w| quote(w)));
            }
            None => words.push(sc.to_string()),
        }
        words.join(" ")
    };
    let part = CommandPart {
        canonical,
        safe: local.safe,
        ruleable: literal_words.is_some()
            && !writes
            && substitutions_ok
            && kept_assignments.is_empty()
            && env_assignments.is_empty(),
    };
    for f in drain(local) {
        acc.add(f);
    }
    part
}

/// Strips the wrappers that change nothing about what a command does (`env`,
/// `command`, `builtin`, `exec`, `nohup`, `time`, `timeout`, `nice`, `ionice`,
/// `stdbuf`), so `timeout 60 cargo test` keys and matches rules as `cargo test`.
/// Returns the assignments `env` makes that change what runs (kept, quoted, like a
/// leading `PATH=…`) and the command itself.
pub(super) fn strip_transparent(words: &[String]) -> (Vec<String>, &[String]) {
    let opt: Vec<Option<String>> = words.iter().cloned().map(Some).collect();
    let mut assigns = Vec::new();
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let name = basename(w);
        let next_is_option = words.get(i + 1).is_some_and(|n| n.starts_with('-'));
        let next = match name {
            "env" => {
                let mut j = i + 1;
                let mut found = Vec::new();
                while let Some((var, _)) = words.get(j).and_then(|w| w.split_once('=')) {
                    if var.is_empty() || var.starts_with('-') {
                        break;
                    }
                    if dangerous_env(var) {
                        found.push(quote(&words[j]));
                    }
                    j += 1;
                }
                if words.get(j).is_none_or(|n| n.starts_with('-')) {
                    break;
                }
                assigns.extend(found);
                j
            }
            "command" | "builtin" | "nohup" | "exec" | "time" if !next_is_option => i + 1,
            "timeout" => {
                wrappers::skip_options(&opt, i + 1, "sk", &["--signal", "--kill-after"]) + 1
            }
            "nice" => wrappers::skip_options(&opt, i + 1, "n", &["--adjustment"]),
            "stdbuf" => wrappers::skip_options(&opt, i + 1, "ioe", &[]),
            "ionice"
                if !words[i + 1..]
                    .iter()
                    .take_while(|w| w.starts_with('-'))
                    .any(|w| w.contains(['p', 'P', 'u'])) =>
            {
                wrappers::skip_options(&opt, i + 1, "cn", &[])
            }
            _ => break,
        };
        if next >= words.len() || next <= i {
            break;
        }
        i = next;
    }
    (assigns, &words[i..])
}

pub(super) fn drain(acc: Acc) -> Vec<Finding> {
    vec![Finding {
        risk: acc.risk,
        safe: acc.safe,
        destructive: acc.destructive,
        network: acc.network,
        elevated: acc.elevated,
        needs_approval: acc.needs_approval,
        reason: acc.reason.map(|r| r.1).unwrap_or_default(),
    }]
}
