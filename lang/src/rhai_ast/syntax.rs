//! Parse errors moved to where the mistake is.
//!
//! Rhai reports a parse error where it found the next token, which for a missing `;` is usually
//! the start of the next line, and for a missing `}` is wherever the text stopped making sense:
//! often a later `fn`, perhaps in the next file (an app's files are parsed as one text).

use rhai::{Engine, Position, Token};

/// Where a brace goes wrong in one file, as (line, column, message); lines and columns are the
/// file's own. Only braces are counted, so strings, characters and comments, which the tokenizer
/// reads as one token each, cannot unbalance them.
pub(crate) fn unbalanced_brace(file: &str, script: &str) -> Option<(usize, usize, String)> {
    let engine = Engine::new_raw();
    let inputs = [script];
    let (mut tokens, control) = engine.lex(&inputs);
    // Open braces: where, and whether it holds an interpolation of a `...${...}...` string.
    let mut open: Vec<(Position, bool)> = Vec::new();
    let mut interpolation_next = false;
    let place = |p: Position| (p.line().unwrap_or(0), p.position().unwrap_or(0));
    loop {
        let Some((token, at)) = tokens.next() else {
            break;
        };
        match token {
            Token::EOF => break,
            // An unterminated string or another lexing error is Rhai's to report.
            Token::LexError(_) => return None,
            Token::InterpolatedString(_) => interpolation_next = true,
            Token::LeftBrace | Token::MapStart => {
                open.push((at, interpolation_next && token == Token::LeftBrace));
                interpolation_next = false;
            }
            Token::RightBrace => match open.pop() {
                // The text of the string goes on after the interpolation's `}`.
                Some((_, true)) => control.borrow_mut().is_within_text = true,
                Some(_) => {}
                None => {
                    let (line, column) = place(at);
                    return Some((
                        line,
                        column,
                        "this } closes no {: remove it, or add the { it should close".into(),
                    ));
                }
            },
            Token::Fn => {
                if let Some((opened, _)) = open.last() {
                    let (line, column) = place(*opened);
                    let (fn_line, fn_column) = place(at);
                    return Some((
                        line,
                        column,
                        format!(
                            "this {{ is never closed (the next fn starts at \
                             {file}:{fn_line}:{fn_column}): add the }} where its block ends"
                        ),
                    ));
                }
            }
            _ => interpolation_next = false,
        }
    }
    let (opened, _) = open.last()?;
    let (line, column) = place(*opened);
    Some((
        line,
        column,
        format!("this {{ is never closed ({file} ends inside it): add the }} where its block ends"),
    ))
}

/// Where a missing `;` belongs: just after the last token before `found`, the position Rhai
/// reports (the token that should have come after the `;`).
pub(crate) fn missing_semicolon(text: &str, found: Position) -> Position {
    let engine = Engine::new_raw();
    let inputs = [text];
    let (mut tokens, _) = engine.lex(&inputs);
    let before = |p: Position| (p.line(), p.position()) < (found.line(), found.position());
    let mut end = found;
    while let Some((token, at)) = tokens.next() {
        if matches!(token, Token::EOF) || !before(at) {
            break;
        }
        // The tokenizer's position is now the token's last character.
        let last = tokens.pos;
        end = Position::new(
            last.line().unwrap_or(0) as u16,
            last.position().unwrap_or(0) as u16 + 1,
        );
    }
    end
}
