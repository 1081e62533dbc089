//! Block rendering: paragraphs, headings, lists, quotes, code blocks and tables that fit the width.

use super::highlight::*;
use super::inline::*;
use super::*;

#[derive(Debug)]
pub(super) enum Container {
    Quote,
    List { next: Option<u64> },
    Item { marker: String, used: bool },
}

#[derive(Debug, Default)]
pub(super) struct Table {
    pub(super) align: Vec<Alignment>,
    pub(super) rows: Vec<Vec<Spans>>,
    pub(super) header_rows: usize,
    pub(super) in_head: bool,
}

/// The event-driven renderer.
#[derive(Debug)]
pub(super) struct Renderer {
    pub(super) opts: RenderOptions,
    pub(super) out: String,
    pub(super) containers: Vec<Container>,
    pub(super) style: Inline,
    pub(super) spans: Spans,
    /// A blank line is due before the next block.
    pub(super) blank: bool,
    pub(super) code: Option<(String, String)>,
    pub(super) table: Option<Table>,
    pub(super) links: Vec<String>,
}

impl Renderer {
    pub(super) fn new(opts: RenderOptions) -> Self {
        Renderer {
            opts,
            out: String::new(),
            containers: Vec::new(),
            style: Inline::default(),
            spans: Spans::default(),
            blank: false,
            code: None,
            table: None,
            links: Vec::new(),
        }
    }

    pub(super) fn color(&self) -> bool {
        self.opts.color
    }

    /// The prefix of the next line, and its width; consumes list markers.
    pub(super) fn prefix(&mut self) -> (String, usize) {
        let color = self.opts.color;
        let mut s = String::new();
        let mut w = 0;
        for c in &mut self.containers {
            match c {
                Container::Quote => {
                    let bar = if color { "│ " } else { "> " };
                    s.push_str(&paint(color, "2", bar));
                    w += 2;
                }
                Container::List { .. } => {}
                Container::Item { marker, used } => {
                    let mw = marker.width();
                    if *used {
                        s.push_str(&" ".repeat(mw));
                    } else {
                        s.push_str(&paint(color, "1;36", marker));
                        *used = true;
                    }
                    w += mw;
                }
            }
        }
        (s, w)
    }

    /// The width left for text after the prefix.
    pub(super) fn text_width(&self) -> Option<usize> {
        let taken: usize = self
            .containers
            .iter()
            .map(|c| match c {
                Container::Quote => 2,
                Container::List { .. } => 0,
                Container::Item { marker, .. } => marker.width(),
            })
            .sum();
        self.opts.width.map(|w| w.saturating_sub(taken).max(20))
    }

    pub(super) fn start_block(&mut self) {
        if self.blank && !self.out.is_empty() {
            let (p, _) = self.blank_prefix();
            self.out.push_str(p.trim_end());
            self.out.push('\n');
        }
        self.blank = false;
    }

    /// The prefix of a blank line inside the containers (quote bars only).
    pub(super) fn blank_prefix(&self) -> (String, usize) {
        let mut s = String::new();
        for c in &self.containers {
            if matches!(c, Container::Quote) {
                let bar = if self.opts.color { "│" } else { ">" };
                s.push_str(&paint(self.opts.color, "2", bar));
                s.push(' ');
            }
        }
        (s, 0)
    }

    pub(super) fn line(&mut self, text: &str) {
        let (p, _) = self.prefix();
        self.out.push_str(&p);
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub(super) fn flush_spans(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        self.start_block();
        for (l, _) in spans.wrap(self.text_width(), self.color()) {
            self.line(&l);
        }
    }

    pub(super) fn end_block(&mut self) {
        self.blank = true;
    }

    pub(super) fn text(&mut self, text: &str) {
        if let Some((_, code)) = &mut self.code {
            code.push_str(text);
            return;
        }
        let style = self.style;
        let spans = self.current_spans();
        // Newlines inside inline text (HTML, for instance) are spaces.
        for (i, part) in text.split('\n').enumerate() {
            if i > 0 {
                spans.space();
            }
            spans.push_text(part, style);
        }
    }

    pub(super) fn current_spans(&mut self) -> &mut Spans {
        if let Some(t) = &mut self.table {
            if let Some(cell) = t.rows.last_mut().and_then(|r| r.last_mut()) {
                return cell;
            }
        }
        &mut self.spans
    }

    pub(super) fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                let style = Inline {
                    code: true,
                    ..self.style
                };
                let t = t.replace('\n', " ");
                self.current_spans().push_text(&t, style);
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                let style = self.style;
                self.current_spans().push_text(&t, style);
            }
            Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
            Event::SoftBreak => self.current_spans().space(),
            Event::HardBreak => self.current_spans().hard_break(),
            Event::Rule => {
                self.flush_spans();
                self.start_block();
                let w = self.text_width().unwrap_or(40).min(40);
                let ch = if self.color() { "─" } else { "-" };
                let rule = paint(self.color(), "2", &ch.repeat(w));
                self.line(&rule);
                self.end_block();
            }
            Event::TaskListMarker(done) => {
                let style = self.style;
                let mark = if done { "[x]" } else { "[ ]" };
                self.current_spans().push_text(mark, style);
                self.current_spans().space();
            }
            Event::FootnoteReference(name) => {
                let style = self.style;
                self.current_spans().push_text(&format!("[{name}]"), style);
            }
        }
    }

    pub(super) fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.flush_spans(),
            Tag::Heading { level, .. } => {
                self.flush_spans();
                self.style.heading = Some(level);
            }
            Tag::BlockQuote(_) => {
                self.flush_spans();
                self.start_block();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.flush_spans();
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split([' ', ',', '{']).next().unwrap_or("").to_owned()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((lang, String::new()));
            }
            Tag::List(start) => {
                self.flush_spans();
                if !self
                    .containers
                    .iter()
                    .any(|c| matches!(c, Container::Item { .. }))
                {
                    self.start_block();
                }
                self.containers.push(Container::List { next: start });
            }
            Tag::Item => {
                self.flush_spans();
                let marker = match self.containers.last_mut() {
                    Some(Container::List { next: Some(n) }) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => {
                        let depth = self
                            .containers
                            .iter()
                            .filter(|c| matches!(c, Container::List { .. }))
                            .count();
                        let bullet = match (self.opts.color, depth % 2) {
                            (false, _) => "-",
                            (true, 1) => "•",
                            (true, _) => "◦",
                        };
                        format!("{bullet} ")
                    }
                };
                self.containers.push(Container::Item {
                    marker,
                    used: false,
                });
            }
            Tag::Emphasis => self.style.emphasis = true,
            Tag::Strong => self.style.strong = true,
            Tag::Strikethrough => self.style.strike = true,
            Tag::Link { dest_url, .. } => {
                self.style.link = true;
                self.links.push(dest_url.to_string());
            }
            Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                let style = self.style;
                self.current_spans().push_text("[image: ", style);
            }
            Tag::Table(align) => {
                self.flush_spans();
                self.table = Some(Table {
                    align,
                    ..Table::default()
                });
            }
            Tag::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = true;
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(row) = self.table.as_mut().and_then(|t| t.rows.last_mut()) {
                    row.push(Spans::default());
                }
            }
            _ => {}
        }
    }

    pub(super) fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_spans();
                self.end_block();
            }
            TagEnd::Heading(_) => {
                self.flush_spans();
                self.style.heading = None;
                self.end_block();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_spans();
                self.containers.pop();
                self.end_block();
            }
            TagEnd::CodeBlock => {
                if let Some((lang, code)) = self.code.take() {
                    self.code_block(&lang, &code);
                }
                self.end_block();
            }
            TagEnd::List(_) => {
                self.flush_spans();
                self.containers.pop();
                if !self
                    .containers
                    .iter()
                    .any(|c| matches!(c, Container::Item { .. }))
                {
                    self.end_block();
                }
            }
            TagEnd::Item => {
                self.flush_spans();
                // An item with nothing in it still shows its marker.
                if matches!(
                    self.containers.last(),
                    Some(Container::Item { used: false, .. })
                ) {
                    self.line("");
                }
                self.containers.pop();
            }
            TagEnd::Emphasis => self.style.emphasis = false,
            TagEnd::Strong => self.style.strong = false,
            TagEnd::Strikethrough => self.style.strike = false,
            TagEnd::Link => {
                self.style.link = false;
                if let Some(url) = self.links.pop() {
                    self.after_link(&url);
                }
            }
            TagEnd::Image => {
                let style = self.style;
                self.current_spans().push_text("]", style);
                if let Some(url) = self.links.pop() {
                    self.after_link(&url);
                }
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = false;
                    t.header_rows = t.rows.len();
                }
            }
            TagEnd::Table => {
                if let Some(t) = self.table.take() {
                    self.render_table(t);
                }
                self.end_block();
            }
            _ => {}
        }
    }

    /// ` (url)` after a link whose text is not the URL itself.
    pub(super) fn after_link(&mut self, url: &str) {
        if url.is_empty() || url.starts_with('#') {
            return;
        }
        let spans = self.current_spans();
        let shown: String = spans
            .tokens
            .iter()
            .rev()
            .take(1)
            .filter_map(|t| match t {
                Token::Word { text, .. } => Some(text.clone()),
                Token::Break => None,
            })
            .collect();
        let bare = url.trim_start_matches("mailto:");
        if shown == url || shown == bare {
            return;
        }
        let style = Inline {
            dim: true,
            ..Inline::default()
        };
        spans.space();
        spans.push_text(&format!("({url})"), style);
    }

    pub(super) fn code_block(&mut self, lang: &str, code: &str) {
        self.start_block();
        let color = self.color();
        if color && !lang.is_empty() {
            let label = paint(true, "2", lang);
            self.line(&format!("  {label}"));
        }
        let code = code.strip_suffix('\n').unwrap_or(code);
        let lines: Vec<String> = if color {
            highlight(lang, code)
        } else {
            code.split('\n').map(str::to_owned).collect()
        };
        for l in lines {
            let text = format!("    {l}");
            self.line(text.trim_end_matches(' '));
        }
    }

    pub(super) fn render_table(&mut self, t: Table) {
        let color = self.color();
        let cols = t.rows.iter().map(Vec::len).max().unwrap_or(0);
        if cols == 0 {
            return;
        }
        self.start_block();
        let natural: Vec<usize> = (0..cols)
            .map(|c| {
                t.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(Spans::plain_width)
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        let minimum: Vec<usize> = (0..cols)
            .map(|c| {
                t.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(Spans::min_width)
                    .max()
                    .unwrap_or(1)
                    .clamp(1, 12)
            })
            .collect();
        let sep_width = 3 * (cols - 1);
        let widths = match self.text_width() {
            Some(w) => fit_columns(&natural, &minimum, w.saturating_sub(sep_width)),
            None => natural,
        };
        let (bar, cross, rule) = if color {
            (" │ ", "─┼─", "─")
        } else {
            (" | ", "-+-", "-")
        };
        for (i, row) in t.rows.iter().enumerate() {
            let header = i < t.header_rows;
            let cells: Vec<Vec<(String, usize)>> = (0..cols)
                .map(|c| {
                    let empty = Spans::default();
                    let mut spans = row.get(c).cloned().unwrap_or(empty);
                    if header {
                        for tok in &mut spans.tokens {
                            if let Token::Word { style, .. } = tok {
                                style.strong = true;
                            }
                        }
                    }
                    spans.wrap(Some(widths[c]), color)
                })
                .collect();
            let height = cells.iter().map(Vec::len).max().unwrap_or(1);
            for l in 0..height {
                let mut line = String::new();
                for (c, cell) in cells.iter().enumerate() {
                    if c > 0 {
                        line.push_str(&paint(color, "2", bar));
                    }
                    let (text, w) = cell.get(l).cloned().unwrap_or_default();
                    let pad = widths[c].saturating_sub(w);
                    let (left, right) = match t.align.get(c) {
                        Some(Alignment::Right) => (pad, 0),
                        Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                        _ => (0, pad),
                    };
                    line.push_str(&" ".repeat(left));
                    line.push_str(&text);
                    line.push_str(&" ".repeat(right));
                }
                self.line(line.trim_end());
            }
            if header && i + 1 == t.header_rows {
                let parts: Vec<String> = widths.iter().map(|w| rule.repeat(*w)).collect();
                let line = paint(color, "2", &parts.join(cross));
                self.line(&line);
            }
        }
    }

    pub(super) fn finish(mut self) -> String {
        self.flush_spans();
        if let Some((lang, code)) = self.code.take() {
            self.code_block(&lang, &code);
        }
        if let Some(t) = self.table.take() {
            self.render_table(t);
        }
        self.out
    }
}

/// Column widths that fit `total`: the natural widths when they fit; otherwise the
/// columns narrower than a fair share keep their width and the others share the rest
/// (never below their minimum, so a table wider than the terminal can remain).
pub(super) fn fit_columns(natural: &[usize], minimum: &[usize], total: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= total {
        return natural.to_vec();
    }
    let mut widths = vec![0; natural.len()];
    let mut open: Vec<usize> = (0..natural.len()).collect();
    let mut left = total;
    loop {
        let share = left / open.len().max(1);
        let (small, big): (Vec<usize>, Vec<usize>) =
            open.iter().partition(|&&c| natural[c] <= share);
        if small.is_empty() {
            let n = big.len().max(1);
            for (k, &c) in big.iter().enumerate() {
                let extra = usize::from(k < left % n);
                widths[c] = (left / n + extra).max(minimum[c]).max(1);
            }
            break;
        }
        for &c in &small {
            widths[c] = natural[c];
            left = left.saturating_sub(natural[c]);
        }
        open = big;
        if open.is_empty() {
            break;
        }
    }
    widths
}
