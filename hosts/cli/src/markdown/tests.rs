use super::blocks::*;
use super::highlight::*;
use super::*;

const PLAIN: RenderOptions = RenderOptions {
    color: false,
    width: Some(60),
};
const COLOR: RenderOptions = RenderOptions {
    color: true,
    width: Some(60),
};

fn plain(md: &str) -> String {
    render(md, PLAIN)
}

/// Removes SGR sequences (the only ones the renderer writes).
fn unstyle(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            for n in it.by_ref() {
                if n == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether every escape sequence is an SGR colour `ESC [ digits/; m`.
fn only_own_colors(s: &str) -> bool {
    s.split('\x1b').skip(1).all(|rest| {
        let Some(body) = rest.strip_prefix('[') else {
            return false;
        };
        let n = body
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ';')
            .count();
        body[n..].starts_with('m')
    })
}

#[test]
fn paragraphs_and_inline_styles_lose_their_markup() {
    assert_eq!(
        plain("Some **bold**, *italic*, ~~gone~~ and `code`.\n\nNext paragraph."),
        "Some bold, italic, gone and code.\n\nNext paragraph.\n"
    );
    let c = render("a **b** *c* `d`", COLOR);
    assert_eq!(c, "a \x1b[1mb\x1b[0m \x1b[3mc\x1b[0m \x1b[33md\x1b[0m\n");
}

#[test]
fn words_keep_their_styles_when_glued() {
    assert_eq!(plain("**a**b and c*d*"), "ab and cd\n");
    assert_eq!(render("**a**b", COLOR), "\x1b[1ma\x1b[0mb\n");
}

#[test]
fn headings() {
    assert_eq!(plain("# Title\n## Sub\ntext"), "Title\n\nSub\n\ntext\n");
    let c = render("# Title", COLOR);
    assert_eq!(c, "\x1b[1;4;35mTitle\x1b[0m\n");
    assert!(render("### Small", COLOR).starts_with("\x1b[1;36m"));
}

#[test]
fn lists_nested_ordered_and_tasks() {
    assert_eq!(
        plain("- one\n- two\n  - inner\n- [x] done\n- [ ] todo"),
        "- one\n- two\n  - inner\n- [x] done\n- [ ] todo\n"
    );
    assert_eq!(plain("3. c\n4. d"), "3. c\n4. d\n");
    let c = unstyle(&render("- a\n  - b", COLOR));
    assert_eq!(c, "• a\n  ◦ b\n");
    // A loose list keeps its blank lines; text after it is a new block.
    assert_eq!(plain("- a\n\n- b\n\nafter"), "- a\n\n- b\n\nafter\n");
}

#[test]
fn quotes_and_rules() {
    assert_eq!(
        plain("> quoted\n> more\n\n---\n\nx"),
        "> quoted more\n\n----------------------------------------\n\nx\n"
    );
    assert_eq!(unstyle(&render("> q", COLOR)), "│ q\n");
}

#[test]
fn links_show_their_target() {
    assert_eq!(
        plain("see [the docs](https://example.com/d) and <https://x.org>"),
        "see the docs (https://example.com/d) and https://x.org\n"
    );
    let c = render("[d](https://e.com)", COLOR);
    assert!(c.contains("\x1b[4;34md\x1b[0m"), "{c:?}");
}

#[test]
fn code_blocks_are_indented_and_highlighted() {
    let md = "```rust\nfn main() {\n    let x = 1;\n}\n```\n";
    assert_eq!(plain(md), "    fn main() {\n        let x = 1;\n    }\n");
    let c = render(md, COLOR);
    assert!(c.contains("\x1b[38;"), "highlighted: {c:?}");
    assert!(!c.contains("```"));
    assert_eq!(
        unstyle(&c),
        "  rust\n    fn main() {\n        let x = 1;\n    }\n"
    );
    // An unknown language is shown as it is.
    assert_eq!(
        unstyle(&render("```nope\na b\n```", COLOR)),
        "  nope\n    a b\n"
    );
}

#[test]
fn tables_align_and_fit_the_width() {
    let md = "| name | n |\n|:---|---:|\n| alpha | 1 |\n| b | 200 |\n";
    assert_eq!(
        plain(md),
        "name  |   n\n------+----\nalpha |   1\nb     | 200\n"
    );
    let c = unstyle(&render(md, COLOR));
    assert_eq!(c, "name  │   n\n──────┼────\nalpha │   1\nb     │ 200\n");
    // Too wide: cells wrap inside their columns, within the width.
    let wide = "| a | b |\n|---|---|\n| one two three four five six seven | x |\n";
    let narrow = render(
        wide,
        RenderOptions {
            color: false,
            width: Some(20),
        },
    );
    for l in narrow.lines() {
        assert!(l.width() <= 20, "{l:?} in\n{narrow}");
    }
    assert!(narrow.contains("one two"), "{narrow}");
    assert!(narrow.lines().count() > 3, "{narrow}");
}

#[test]
fn paragraphs_wrap_at_the_width_with_their_prefix() {
    let md = "- aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii jjjj kkkk";
    let out = render(
        md,
        RenderOptions {
            color: false,
            width: Some(24),
        },
    );
    assert_eq!(
        out,
        "- aaaa bbbb cccc dddd\n  eeee ffff gggg hhhh\n  iiii jjjj kkkk\n"
    );
    // No width: no wrapping.
    let out = render(
        md,
        RenderOptions {
            color: false,
            width: None,
        },
    );
    assert_eq!(out.lines().count(), 1);
}

#[test]
fn control_characters_and_escapes_in_model_text_are_removed() {
    let evil = "a\x1b[2Jb\x1b]0;title\x07c\x1b[31md\x07e\x08f\r\ng\x1bPdcs\x1b\\h\u{9b}i\x7f";
    for opts in [PLAIN, COLOR] {
        let out = render(evil, opts);
        let text = unstyle(&out);
        assert_eq!(text, "abcdef ghi\n", "{out:?}");
    }
    // Colour off: no escape at all.
    assert!(!render(evil, PLAIN).contains('\x1b'));
    // Colour on: only the renderer's own colours.
    let out = render(&format!("**{evil}**"), COLOR);
    assert!(only_own_colors(&out), "{out:?}");
    assert_eq!(unstyle(&out), "abcdef ghi\n");
    assert!(!render("```\n\x1b[2J\n```", COLOR).contains("[2J"));
    assert_eq!(strip_controls("ok\ttab\n"), "ok\ttab\n");
}

#[test]
fn streaming_prints_closed_blocks_and_keeps_the_tail() {
    let mut s = MarkdownStream::new(PLAIN);
    assert_eq!(s.push("# Head"), "");
    assert_eq!(s.push("ing\nSome **bo"), "Heading\n");
    assert_eq!(s.push("ld** text"), "");
    assert_eq!(
        s.push(" here.\n\n```rust\nfn x() {}\n"),
        "\nSome bold text here.\n"
    );
    assert_eq!(s.push("\n\nstill code\n"), "", "inside the fence");
    assert_eq!(
        s.push("```\nafter"),
        "\n    fn x() {}\n\n\n    still code\n"
    );
    assert!(s.is_pending());
    assert_eq!(s.finish(), "\nafter\n");
    assert!(!s.is_pending());
    // A new message starts without a blank line.
    assert_eq!(s.push("new\n\n"), "new\n");
}

#[test]
fn streaming_gives_the_same_text_as_a_whole_render() {
    let md = "# Plan\n\nFirst **step** and a list:\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```sh\necho hi\n```\nDone.";
    let whole = render(md, PLAIN);
    for size in [1, 3, 7, 50] {
        let mut s = MarkdownStream::new(PLAIN);
        let mut out = String::new();
        let chars: Vec<char> = md.chars().collect();
        for piece in chars.chunks(size) {
            out.push_str(&s.push(&piece.iter().collect::<String>()));
        }
        out.push_str(&s.finish());
        assert_eq!(out, whole, "pieces of {size}");
    }
}

#[test]
fn fences_are_recognised() {
    assert_eq!(complete_prefix("```\na\n\nb\n"), 0);
    assert_eq!(complete_prefix("```\na\n```\nrest"), 10);
    assert_eq!(complete_prefix("~~~~\n```\n~~~~\n"), 14);
    assert_eq!(complete_prefix("para\n\nmore"), 6);
    assert_eq!(complete_prefix("## h\npara"), 5);
    assert_eq!(complete_prefix("#nospace\n"), 0);
}

#[test]
fn columns_share_the_width() {
    assert_eq!(fit_columns(&[5, 5], &[1, 1], 20), vec![5, 5]);
    assert_eq!(fit_columns(&[3, 40], &[1, 5], 20), vec![3, 17]);
    let w = fit_columns(&[30, 40], &[4, 4], 20);
    assert_eq!(w.iter().sum::<usize>(), 20);
    assert_eq!(fit_columns(&[30, 30], &[12, 12], 10), vec![12, 12]);
}

#[test]
fn palette_approximation() {
    assert_eq!(ansi256(0, 0, 0), 16);
    assert_eq!(ansi256(255, 255, 255), 231);
    assert_eq!(ansi256(255, 0, 0), 196);
    assert_eq!(ansi256(128, 128, 128), 244);
}
