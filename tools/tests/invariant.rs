//! The shell-analysis invariant as a property: a command that contains a program
//! anywhere in its parse (wrappers, `-c` strings, here-documents, schedulers, inline
//! code, pipelines, lists, subshells, substitutions) is never rated below that program
//! alone, nor decided less strictly in any permission mode.

#[path = "support/shell_shapes.rs"]
mod shapes;

use proptest::prelude::*;

fn layers() -> impl Strategy<Value = Vec<(u8, u8)>> {
    prop::collection::vec((0u8..3, any::<u8>()), 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn hidden_programs_are_never_rated_lower(
        program in 0..shapes::PROGRAMS.len(),
        layers in layers(),
    ) {
        let (_dir, ws) = shapes::workspace();
        let shape = shapes::build(program, false, &layers);
        if let Err(e) = shapes::check(&ws, shape.program, &shape.command) {
            prop_assert!(false, "{e}\ncommand:\n{}", shape.command);
        }
    }

    #[test]
    fn hidden_fork_bombs_are_denied(layers in layers()) {
        let (_dir, ws) = shapes::workspace();
        let shape = shapes::build(0, true, &layers);
        if let Err(e) = shapes::check(&ws, shape.program, &shape.command) {
            prop_assert!(false, "{e}\ncommand:\n{}", shape.command);
        }
    }
}

/// Every wrapper, quoting form and composition, one layer deep, for every program:
/// the exhaustive neighbourhood the random search starts from.
#[test]
fn every_single_layer_keeps_the_rating() {
    let (_dir, ws) = shapes::workspace();
    let mut failures = Vec::new();
    for program in 0..shapes::PROGRAMS.len() {
        for kind in 0u8..3 {
            let n = [
                shapes::WRAPS.len(),
                shapes::QUOTES.len(),
                shapes::COMPOSES.len(),
            ][usize::from(kind)];
            for index in 0..n {
                let index = u8::try_from(index).expect("small table");
                let shape = shapes::build(program, false, &[(kind, index)]);
                if let Err(e) = shapes::check(&ws, shape.program, &shape.command) {
                    failures.push(format!("{e}\n  command: {:?}", shape.command));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
