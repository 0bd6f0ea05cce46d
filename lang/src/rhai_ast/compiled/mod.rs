//! Handlers compiled from Rhai's AST into Rust closures: the fast path for the handlers it covers.
//!
//! Rhai's evaluator walks the AST and, for every step, searches scopes by name, resolves functions
//! by hashing argument types and checks limits (docs/research/001: 1.4–2.5k instructions for a
//! property read or an `+=`). Compiling a handler once at load turns each of those steps into a
//! closure with everything resolved ahead: local variables are slots in a stack, table constants
//! are values, script functions are indices, operators and the table API are direct calls.
//!
//! The compiled path is an optimization, never a second semantics. It covers a subset of the
//! language (`compile.rs` says which) and, at run time, only the cases it is sure of: whatever
//! else happens (an error of any kind, a limit reached, a value of a type it does not handle) it
//! stops with [`Stop::Fallback`], the caller rolls the call's writes back and runs the same
//! handler again in Rhai, which produces the answer or the error, with its message and position.
//! Rhai gets the request as it was sent: a handler whose code never changes its parameter is
//! lent the request's body (a batch's map of a thousand entries is not copied for each call),
//! and hands it back unchanged when it stops; any other is given a copy.
//! Handlers that use anything outside the subset are not compiled at all and always run in Rhai.
//!
//! Two things Rhai's evaluator cannot know are known here, at compile time. Where a value is
//! often an integer (a literal, a local, a row's field, an operator's result), the code hands it
//! on as an `i64` ([`IntCode`]) and boxes it in a `Dynamic` only where a value leaves the
//! arithmetic; any other value goes the general way, so the guard is the type test that the
//! general way makes anyway. And where a read of a local is its last use (no later code names
//! it, no loop comes back to it), the read takes the value instead of copying it: an answer's
//! list of lines goes into the answer without a deep copy.
//! Two stops are decided here: `throw`, which is how handlers answer bad requests, and a spent
//! wall-clock budget, which Rhai would only spend a second time.
//!
//! It must not know threads, the record format or HTTP, like the rest of `lang`.

mod answer;
mod compile;
mod ops;
mod pure;

pub(crate) use answer::WrittenAnswer;

use std::collections::HashMap;

use rhai::{Dynamic, Engine, Position, AST};

use crate::script::error::SourceMap;
use crate::script::limits::Limits;
use crate::state::schema::Schema;
use crate::state::tables::IndexDef;

/// Why compiled code stopped before its value.
pub(crate) enum Stop {
    Return(Dynamic),
    Break,
    Continue,
    /// `throw value`: the handler's own answer to a bad request.
    Throw(Dynamic),
    /// Something the compiled path does not decide: run the handler in Rhai instead.
    Fallback,
    /// The call's wall-clock budget is spent: running it again in Rhai would spend it twice.
    /// Where: the innermost statement that was running (none until a statement is left).
    OutOfTime(Position),
}

impl Stop {
    /// This stop as it leaves the statement at `at`: a spent budget is placed there, if no
    /// statement inside has placed it already. A case left to Rhai once the budget is spent
    /// (a scan notices it too) is that: Rhai would only spend a second budget.
    #[inline]
    fn leaving(self, at: Position) -> Stop {
        match self {
            Stop::OutOfTime(p) if p.is_none() => Stop::OutOfTime(at),
            Stop::Fallback if crate::script::context::deadline_passed() => Stop::OutOfTime(at),
            stop => stop,
        }
    }
}

type Outcome = Result<Dynamic, Stop>;

/// A compiled expression or statement.
type Code = Box<dyn Fn(&mut Frame) -> Outcome + Send + Sync>;

/// A compiled expression whose value is often an integer: an integer comes out as one, any
/// other value as a `Dynamic` (see `compile::Compiler::int_operand`).
type IntCode = Box<dyn Fn(&mut Frame) -> Result<ops::IntOr, Stop> + Send + Sync>;

struct Function {
    /// Slots for parameters and every local its body declares.
    slots: usize,
    body: Code,
    /// No code of the body changes its first parameter in place (see
    /// `compile::Compiler::changes_first_parameter`): after a call the parameter's slot holds
    /// the argument as it was given.
    keeps_first_parameter: bool,
}

/// The compiled script functions of an app, and which handlers can use them.
pub(crate) struct Program {
    functions: Vec<Option<Function>>,
    /// Handler name to function index, for handlers whose whole call tree compiled.
    handlers: HashMap<String, usize>,
    /// Handlers left to Rhai, with the first construct the compiler does not cover.
    interpreted: HashMap<String, String>,
}

/// What compiled code runs with: the limits and names it needs, not the tables (those are in the
/// thread's handler context, as for Rhai).
pub(crate) struct Env<'a> {
    pub engine: &'a Engine,
    pub schema: &'a Schema,
    pub limits: &'a Limits,
}

/// One handler call's running state.
pub(crate) struct Frame<'a> {
    program: &'a Program,
    env: &'a Env<'a>,
    stack: Vec<Dynamic>,
    /// Where the running function's slots start in `stack`.
    base: usize,
    operations: u64,
    /// Script function calls in progress, the handler's included.
    depth: usize,
    /// The sizes (as the size limits count them) of one local, by its index in `stack`: what
    /// that local holds exactly, when known. A map or array built in a loop is checked against
    /// the limits after every step; knowing its sizes makes each check cost the step, not the
    /// whole value. Every mutable access to a local through [`Frame::local`] forgets them.
    sized: Option<(usize, ops::Sizes)>,
    /// The first call's argument as given, back from its slot after the call when the function
    /// keeps its first parameter.
    argument_back: Option<Dynamic>,
}

/// Operations between two wall-clock checks (as in the Rhai engine's `on_progress`).
const CLOCK_CHECK_OPERATIONS: u64 = 256;

impl Frame<'_> {
    /// Charges `operations` against the limits (see `compile::Compiler::stmt` for how many). Past a
    /// limit the handler goes to Rhai, which stops it with Rhai's own error.
    #[inline]
    fn tick(&mut self, operations: u64) -> Result<(), Stop> {
        let before = self.operations;
        self.operations += operations;
        if self.operations > self.env.limits.operations_max {
            return Err(Stop::Fallback);
        }
        if before / CLOCK_CHECK_OPERATIONS != self.operations / CLOCK_CHECK_OPERATIONS
            && crate::script::context::deadline_passed()
        {
            return Err(Stop::OutOfTime(Position::NONE));
        }
        Ok(())
    }

    /// A local, to change as the caller likes: its sizes are forgotten.
    #[inline]
    fn local(&mut self, slot: usize) -> &mut Dynamic {
        let at = self.base + slot;
        if matches!(self.sized, Some((i, _)) if i == at) {
            self.sized = None;
        }
        &mut self.stack[at]
    }

    #[inline]
    fn local_ref(&self, slot: usize) -> &Dynamic {
        &self.stack[self.base + slot]
    }

    /// A local for code that cannot change its sizes (a chain that reads, or calls a method
    /// that changes neither arrays, maps nor strings): its sizes stay known.
    #[inline]
    fn local_same_sizes(&mut self, slot: usize) -> &mut Dynamic {
        &mut self.stack[self.base + slot]
    }

    /// A local with its sizes if they are known (they are forgotten until
    /// [`Frame::keep_sizes`] gives them back).
    #[inline]
    fn local_sized(&mut self, slot: usize) -> (&mut Dynamic, Option<ops::Sizes>) {
        let at = self.base + slot;
        let sizes = match self.sized {
            Some((i, sizes)) if i == at => {
                self.sized = None;
                Some(sizes)
            }
            _ => None,
        };
        (&mut self.stack[at], sizes)
    }

    /// What the local in `slot` holds as the size limits count it, if known, leaving it known.
    #[inline]
    fn known_sizes(&self, slot: usize) -> Option<ops::Sizes> {
        match self.sized {
            Some((i, sizes)) if i == self.base + slot => Some(sizes),
            _ => None,
        }
    }

    /// Records what a local holds now; it must be exact (see `sized`).
    #[inline]
    fn keep_sizes(&mut self, slot: usize, sizes: ops::Sizes) {
        let at = self.base + slot;
        #[cfg(debug_assertions)]
        {
            // A value past the depth rule is not walked; sizes kept by counting hold for it.
            let walked = ops::Sizes::of(&self.stack[at]);
            assert!(
                walked == sizes || walked == ops::Sizes::TOO_DEEP,
                "the sizes kept are exact: kept {sizes:?}, walked {walked:?}"
            );
        }
        self.sized = Some((at, sizes));
    }

    fn call(&mut self, function: usize, args: Vec<Dynamic>) -> Outcome {
        let Some(Some(callee)) = self.program.functions.get(function) else {
            return Err(Stop::Fallback);
        };
        // Rhai charges a call to a script function at its site and at its start.
        let entered = match self.tick(3) {
            Ok(()) if self.depth >= self.env.limits.call_levels_max => Err(Stop::Fallback),
            entered => entered,
        };
        if let Err(stop) = entered {
            if self.depth == 0 && callee.keeps_first_parameter {
                self.argument_back = args.into_iter().next();
            }
            return Err(stop);
        }
        let (base, depth) = (self.base, self.depth);
        // The slots a function was compiled with hold its parameters first: fewer would cut
        // off arguments below.
        assert!(
            callee.slots >= args.len(),
            "a function's slots hold its parameters"
        );
        self.base = self.stack.len();
        self.depth += 1;
        self.stack.extend(args);
        self.stack.resize(self.base + callee.slots, Dynamic::UNIT);
        let result = (callee.body)(self);
        // Locals live at fixed places above `base`: a body that popped below it would have
        // handed its caller's locals to the wrong names.
        assert!(
            self.stack.len() >= self.base,
            "a function never pops its caller's slots"
        );
        if depth == 0 && callee.keeps_first_parameter && callee.slots > 0 {
            self.argument_back = Some(std::mem::take(&mut self.stack[self.base]));
        }
        self.stack.truncate(self.base);
        // The callee's locals are gone, and their places will hold other values.
        if matches!(self.sized, Some((i, _)) if i >= self.base) {
            self.sized = None;
        }
        self.base = base;
        self.depth = depth;
        match result {
            Ok(value) | Err(Stop::Return(value)) => Ok(value),
            Err(Stop::Break | Stop::Continue) => Err(Stop::Fallback),
            Err(stop) => Err(stop),
        }
    }
}

impl Program {
    pub(crate) fn compile(
        ast: &AST,
        schema: &Schema,
        indexes: &[IndexDef],
        handlers: &[String],
        sources: &SourceMap,
    ) -> Program {
        compile::compile_program(ast, schema, indexes, handlers, sources)
    }

    /// The compiled form of `handler`, if it has one.
    pub(crate) fn handler(&self, handler: &str) -> Option<usize> {
        self.handlers.get(handler).copied()
    }

    /// Why `handler` runs in Rhai (None when it is compiled).
    pub(crate) fn interpreted_reason(&self, handler: &str) -> Option<&str> {
        self.interpreted.get(handler).map(String::as_str)
    }

    /// Whether the compiled `function` leaves its first parameter as given, so that a caller
    /// may lend it a value it wants back (see [`Program::run`]).
    pub(crate) fn keeps_first_parameter(&self, function: usize) -> bool {
        matches!(self.functions.get(function), Some(Some(f)) if f.keeps_first_parameter)
    }

    /// Runs a compiled handler (from [`Program::handler`]) with the thread's handler context
    /// already installed. Also returns the argument as given when the handler keeps its
    /// parameter and the call ended (a panic aside): a call that Rhai must run again can use it.
    pub(crate) fn run(
        &self,
        function: usize,
        argument: Dynamic,
        env: &Env,
    ) -> (Result<Dynamic, Stop>, Option<Dynamic>) {
        let mut frame = Frame {
            program: self,
            env,
            stack: Vec::with_capacity(32),
            base: 0,
            operations: 0,
            depth: 0,
            sized: None,
            argument_back: None,
        };
        let result = frame.call(function, vec![argument]);
        assert!(
            frame.stack.is_empty() && frame.depth == 0 && frame.base == 0,
            "every call returned its frame, whatever stopped it"
        );
        (result, frame.argument_back)
    }
}
