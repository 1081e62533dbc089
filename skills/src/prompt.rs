//! The texts a model reads: the list of skills for the system prompt, a skill's
//! activation, and the prompt a person's `/skill:NAME` sends.

use crate::skill::{Activation, Skill};

/// At most this many skills are listed in the system prompt (the first by name); the
/// others are named in one line.
pub const MAX_CATALOG_SKILLS: usize = 100;

/// Escapes text for the XML-like blocks (`<`, `>`, `&`).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// The block of the system prompt that lists the skills (names and descriptions only)
/// and says how to activate one with the `activate_skill` tool; `None` without skills,
/// so a session without skills gets no block at all.
pub fn catalog_block(skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = String::from(
        "## Skills\n\n\
         Skills are folders of instructions for particular tasks. Each skill below has a \
         name and a description of what it does and when to use it. When a task matches \
         a skill's description, call `activate_skill` with its `name` before you start, \
         then follow the instructions it returns. Read the files those instructions name \
         with `activate_skill` and its `file` argument, only when they call for them; run \
         a skill's scripts with `run_shell`. Never activate a skill that is not listed.\n\n\
         <available_skills>\n",
    );
    for s in skills.iter().take(MAX_CATALOG_SKILLS) {
        out.push_str(&format!(
            "<skill name=\"{}\">{}</skill>\n",
            s.name,
            escape(&s.description)
        ));
    }
    out.push_str("</available_skills>\n");
    if skills.len() > MAX_CATALOG_SKILLS {
        let rest: Vec<&str> = skills[MAX_CATALOG_SKILLS..]
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        out.push_str(&format!(
            "More skills, without their descriptions: {}.\n",
            rest.join(", ")
        ));
    }
    Some(out)
}

impl Activation {
    /// The skill's instructions as the model reads them: the body in a
    /// `<skill_content>` block, then the skill's folder and its other files.
    pub fn text(&self) -> String {
        let mut out = format!(
            "<skill_content name=\"{}\">\n{}\n</skill_content>\n",
            self.name,
            self.body.trim()
        );
        out.push_str(&format!("The skill's folder: {}\n", self.dir.display()));
        if self.files.is_empty() {
            out.push_str("It has no other files.\n");
        } else {
            out.push_str("Its other files (relative to that folder): ");
            out.push_str(&self.files.join(", "));
            if self.more_files {
                out.push_str(", and more not listed");
            }
            out.push_str(".\n");
        }
        out
    }
}

/// The prompt sent when a person activates a skill (`/skill:NAME request`): the
/// skill's instructions, then the request, if any.
pub fn activation_prompt(activation: &Activation, request: &str) -> String {
    let mut out = format!(
        "Use the skill \"{}\" for this request. Its instructions:\n\n{}",
        activation.name,
        activation.text()
    );
    let request = request.trim();
    if !request.is_empty() {
        out.push_str("\nThe request: ");
        out.push_str(request);
        out.push('\n');
    }
    out
}
