//! Syntax highlighting of code blocks (syntect with its bundled syntaxes and theme).

use super::inline::paint;
use super::*;

/// Syntaxes and the theme, loaded once (bundled with syntect, no network).
pub(super) fn highlighting() -> &'static (syntect::parsing::SyntaxSet, syntect::highlighting::Theme)
{
    static SETS: OnceLock<(syntect::parsing::SyntaxSet, syntect::highlighting::Theme)> =
        OnceLock::new();
    SETS.get_or_init(|| {
        let syntaxes = syntect::parsing::SyntaxSet::load_defaults_newlines();
        let mut themes = syntect::highlighting::ThemeSet::load_defaults();
        let theme = themes
            .themes
            .remove("base16-ocean.dark")
            .or_else(|| themes.themes.into_values().next())
            .unwrap_or_default();
        (syntaxes, theme)
    })
}

/// Whether the terminal takes 24-bit colours (`COLORTERM`).
pub(super) fn truecolor() -> bool {
    static TRUE: OnceLock<bool> = OnceLock::new();
    *TRUE.get_or_init(|| std::env::var("COLORTERM").is_ok_and(|v| v == "truecolor" || v == "24bit"))
}

/// The code's lines with colours for `lang` (a name or file extension); plain lines
/// when the language is unknown.
pub(super) fn highlight(lang: &str, code: &str) -> Vec<String> {
    use syntect::easy::HighlightLines;
    let (syntaxes, theme) = highlighting();
    let syntax = (!lang.is_empty())
        .then(|| syntaxes.find_syntax_by_token(lang))
        .flatten();
    let Some(syntax) = syntax else {
        return code.split('\n').map(str::to_owned).collect();
    };
    let mut h = HighlightLines::new(syntax, theme);
    let mut out = Vec::new();
    for line in code.split('\n') {
        let with_nl = format!("{line}\n");
        match h.highlight_line(&with_nl, syntaxes) {
            Ok(ranges) => {
                let mut s = String::new();
                for (style, text) in ranges {
                    let text = text.trim_end_matches('\n');
                    if text.is_empty() {
                        continue;
                    }
                    let fg = style.foreground;
                    let code = if truecolor() {
                        format!("38;2;{};{};{}", fg.r, fg.g, fg.b)
                    } else {
                        format!("38;5;{}", ansi256(fg.r, fg.g, fg.b))
                    };
                    s.push_str(&paint(true, &code, text));
                }
                out.push(s);
            }
            Err(_) => out.push(line.to_owned()),
        }
    }
    out
}

/// The nearest colour of the xterm 256-colour palette (6×6×6 cube or grey ramp).
pub(super) fn ansi256(r: u8, g: u8, b: u8) -> u8 {
    let level = |v: u8| -> u8 {
        if v < 48 {
            0
        } else if v < 115 {
            1
        } else {
            (v - 35) / 40
        }
    };
    let (lr, lg, lb) = (level(r), level(g), level(b));
    let cube = 16 + 36 * lr + 6 * lg + lb;
    let steps = [0u8, 95, 135, 175, 215, 255];
    let cube_rgb = (steps[lr as usize], steps[lg as usize], steps[lb as usize]);
    let avg = (u16::from(r) + u16::from(g) + u16::from(b)) / 3;
    let grey_idx = if avg > 238 {
        23
    } else {
        (avg.saturating_sub(3) / 10) as u8
    };
    let grey = 8 + 10 * u16::from(grey_idx);
    let dist = |a: (u8, u8, u8)| {
        let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).pow(2);
        d(a.0, r) + d(a.1, g) + d(a.2, b)
    };
    let g8 = grey as u8;
    if dist((g8, g8, g8)) < dist(cube_rgb) {
        232 + grey_idx
    } else {
        cube
    }
}
