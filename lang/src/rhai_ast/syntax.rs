//! Parse errors moved to where the mistake is.
//!
//! Rhai reports a parse error where it found the next token, which for a missing `;` is usually
//! the start of the next line, and for a missing `}` is wherever the text stopped making sense:
//! often a later `fn`, perhaps in the next file (an app's files are parsed as one text).

use rhai::{Engine, Position, Token};

/// A script's tokens, each with where it starts and where its last character is. Rhai's
/// tokenizer must be told when a `}` ends the interpolation of a `...${...}...` string, for the
/// string's text goes on after it: without that, everything after the first template string is
/// read as code and text the wrong way round. Lexing stops at the first lexing error (an
/// unterminated string, say), which is Rhai's to report: the flag says whether it got to the
/// end.
fn tokens(script: &str) -> (Vec<(Token, Position, Position)>, bool) {
    let engine = Engine::new_raw();
    let inputs = [script];
    let (mut stream, control) = engine.lex(&inputs);
    // Open braces: whether each holds an interpolation.
    let mut open: Vec<bool> = Vec::new();
    let mut interpolation_next = false;
    let mut out = Vec::new();
    while let Some((token, at)) = stream.next() {
        match token {
            Token::EOF => break,
            Token::LexError(_) => return (out, false),
            Token::InterpolatedString(_) => interpolation_next = true,
            Token::LeftBrace | Token::MapStart => {
                open.push(interpolation_next && token == Token::LeftBrace);
                interpolation_next = false;
            }
            Token::RightBrace => {
                if open.pop() == Some(true) {
                    control.borrow_mut().is_within_text = true;
                }
            }
            _ => interpolation_next = false,
        }
        out.push((token, at, stream.pos));
    }
    (out, true)
}

fn place(p: Position) -> (usize, usize) {
    (p.line().unwrap_or(0), p.position().unwrap_or(0))
}

/// How far a line is indented, in columns: a tab moves to the next multiple of 4, as most
/// editors show it, so that a line indented with a tab and one with four spaces line up.
fn indent(script: &str, line: usize) -> usize {
    let text = script.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let mut columns = 0;
    for c in text.chars() {
        match c {
            ' ' => columns += 1,
            '\t' => columns = (columns / 4 + 1) * 4,
            _ => break,
        }
    }
    columns
}

/// Where a brace goes wrong in one file, as (line, column, message); lines and columns are the
/// file's own. Only braces are counted, so strings, characters and comments, which the tokenizer
/// reads as one token each, cannot unbalance them.
///
/// When a `{` is left open, the brace that pairs with the last `}` is usually not the one
/// missing its `}`: in `fn f() { if x { a(); b(); }` the `}` meant for the function closes the
/// `if`, and it is the function's `{` that looks open. The `{` to name is the first whose `}`
/// was found on a line indented less than the line it opened on and no more than the line of
/// the `{` around it (the author's indentation says the `}` was meant for that outer block; a
/// `}` merely less indented than a condition that ran over two lines is not); only when every
/// pair agrees with the indentation is it the innermost open one.
pub(crate) fn unbalanced_brace(file: &str, script: &str) -> Option<(usize, usize, String)> {
    // Open braces, where each opened; and the opening of each pair closed on a line indented
    // less than its own, in the order the pairs opened.
    let mut open: Vec<Position> = Vec::new();
    let mut misclosed: Vec<Position> = Vec::new();
    let never_closed = |open: &[Position], misclosed: &[Position], why: String| {
        let innermost = *open.last()?;
        // A pair opened inside the open brace, not before it.
        let culprit = misclosed
            .iter()
            .copied()
            .filter(|p| place(*p) > place(innermost))
            .min_by_key(|p| place(*p))
            .unwrap_or(innermost);
        let (line, column) = place(culprit);
        Some((
            line,
            column,
            format!("this {{ is never closed ({why}): add the }} where its block ends"),
        ))
    };
    let (tokens, complete) = tokens(script);
    if !complete {
        return None;
    }
    for (token, at, _) in tokens {
        match token {
            Token::LeftBrace | Token::MapStart => open.push(at),
            Token::RightBrace => match open.pop() {
                Some(opened) => {
                    let (open_line, _) = place(opened);
                    let (close_line, _) = place(at);
                    let closing = indent(script, close_line);
                    let outer = open.last().map_or(0, |p| indent(script, place(*p).0));
                    if close_line != open_line
                        && closing < indent(script, open_line)
                        && closing <= outer
                    {
                        misclosed.push(opened);
                    }
                }
                None => {
                    let (line, column) = place(at);
                    return Some((
                        line,
                        column,
                        "this } closes no {: remove it, or add the { it should close".into(),
                    ));
                }
            },
            Token::Fn if !open.is_empty() => {
                let (fn_line, fn_column) = place(at);
                let why = format!("the next fn starts at {file}:{fn_line}:{fn_column}");
                return never_closed(&open, &misclosed, why);
            }
            _ => {}
        }
    }
    never_closed(&open, &misclosed, format!("{file} ends inside it"))
}

/// Where a missing `;` belongs: just after the last token before `found`, the position Rhai
/// reports (the token that should have come after the `;`).
pub(crate) fn missing_semicolon(text: &str, found: Position) -> Position {
    let before = |p: Position| place(p) < place(found);
    let mut end = found;
    for (_, at, last) in tokens(text).0 {
        if !before(at) {
            break;
        }
        end = Position::new(
            last.line().unwrap_or(0) as u16,
            last.position().unwrap_or(0) as u16 + 1,
        );
    }
    end
}
