//! Integer expressions that change nothing, evaluated in one go.
//!
//! Compiled code hands an integer from closure to closure ([`super::IntCode`]): each node of
//! `on_hand - quantity + 91` is a call through a pointer that returns a `Result` of an
//! `IntOr`, some 30 instructions before it adds anything. An expression made only of integer
//! literals, locals, a row local's fields, a local array's items and arithmetic or comparisons
//! on those is also kept as a [`Pure`] tree, which one `match` walks with the integers in
//! registers. It answers `None` whenever it is not sure: a value that is not an integer, an
//! overflow, a division by zero. The general code then runs and decides exactly as before; as
//! a `Pure` expression reads and changes nothing else, evaluating it first changes nothing.

use super::ops::{self, BinOp, IntOr, Property};
use super::{Frame, IntCode, Stop};

/// A closure for a [`Pure`] tree: the integer, or `None` (the general code decides).
pub(crate) type PureCode = Box<dyn Fn(&Frame) -> Option<i64> + Send + Sync>;

/// A closure for a [`Comparison`].
pub(crate) type TestCode = Box<dyn Fn(&Frame) -> Option<bool> + Send + Sync>;

/// An integer expression that reads locals and changes nothing (see the module doc).
pub(crate) enum Pure {
    Const(i64),
    Local(usize),
    /// `local.name` where the local holds a row: its field, read from its packed slot.
    Field(usize, Property),
    /// `local[index]` where the local holds an array.
    Item(usize, Box<Pure>),
    /// `+ - * / %` on integers, checked as Rhai checks them.
    Arithmetic(BinOp, Box<Pure>, Box<Pure>),
    /// `if test { x } else { y }` as a value.
    Choice(Box<Comparison>, Box<Pure>, Box<Pure>),
}

impl Pure {
    /// Whether it reads more than one value: worth a closure of its own beside the general
    /// code (a leaf costs what the general code's closure for it does).
    pub(crate) fn is_compound(&self) -> bool {
        matches!(
            self,
            Pure::Item(..) | Pure::Arithmetic(..) | Pure::Choice(..)
        )
    }

    /// One closure for the whole tree, the common shapes (an operator on two locals, or on a
    /// local and a constant; an array's item at a local index) in one step.
    pub(crate) fn fuse(self) -> PureCode {
        match self {
            Pure::Const(value) => Box::new(move |_| Some(value)),
            Pure::Local(slot) => Box::new(move |f| int(f, slot)),
            Pure::Field(slot, property) => {
                Box::new(move |f| ops::row_int(f.local_ref(slot), &property))
            }
            Pure::Item(slot, index) => match *index {
                Pure::Local(at) => Box::new(move |f| item(f, slot, int(f, at)?)),
                index => {
                    let index = index.fuse();
                    Box::new(move |f| item(f, slot, index(f)?))
                }
            },
            Pure::Arithmetic(op, x, y) => match (*x, *y) {
                (Pure::Local(a), Pure::Local(b)) => {
                    Box::new(move |f| arithmetic(op, int(f, a)?, int(f, b)?))
                }
                (Pure::Local(a), Pure::Const(b)) => {
                    Box::new(move |f| arithmetic(op, int(f, a)?, b))
                }
                (x, y) => {
                    let (x, y) = (x.fuse(), y.fuse());
                    Box::new(move |f| arithmetic(op, x(f)?, y(f)?))
                }
            },
            Pure::Choice(test, x, y) => {
                let (test, x, y) = (test.fuse(), x.fuse(), y.fuse());
                Box::new(move |f| if test(f)? { x(f) } else { y(f) })
            }
        }
    }
}

#[inline(always)]
fn int(f: &Frame, slot: usize) -> Option<i64> {
    f.local_ref(slot).as_int().ok()
}

/// `array[index]` as Rhai reads it (a negative index counts from the end), if an integer.
#[inline]
fn item(f: &Frame, slot: usize, index: i64) -> Option<i64> {
    let array = f.local_ref(slot).as_array_ref().ok()?;
    let at = if index < 0 {
        index.checked_add(array.len() as i64)?
    } else {
        index
    };
    array.get(usize::try_from(at).ok()?)?.as_int().ok()
}

/// `a op b` for the operators a [`Pure`] tree holds, `None` where Rhai would fail.
#[inline]
fn arithmetic(op: BinOp, a: i64, b: i64) -> Option<i64> {
    match op {
        BinOp::Add => a.checked_add(b),
        BinOp::Sub => a.checked_sub(b),
        BinOp::Mul => a.checked_mul(b),
        BinOp::Div => a.checked_div(b),
        BinOp::Rem => a.checked_rem(b),
        _ => None,
    }
}

/// Whether `op` is one a [`Pure`] tree computes.
pub(crate) fn is_arithmetic(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem
    )
}

/// Whether `op` compares two integers.
pub(crate) fn is_comparison(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    )
}

/// A comparison of two [`Pure`] integers (`on_hand >= quantity + 10`).
pub(crate) struct Comparison {
    pub op: BinOp,
    pub x: Pure,
    pub y: Pure,
}

impl Comparison {
    pub(crate) fn fuse(self) -> TestCode {
        let op = self.op;
        match (self.x, self.y) {
            (Pure::Local(a), Pure::Local(b)) => {
                Box::new(move |f| compare(op, int(f, a)?, int(f, b)?))
            }
            (x, y) => {
                let (x, y) = (x.fuse(), y.fuse());
                Box::new(move |f| compare(op, x(f)?, y(f)?))
            }
        }
    }
}

#[inline]
fn compare(op: BinOp, a: i64, b: i64) -> Option<bool> {
    Some(match op {
        BinOp::Eq => a == b,
        BinOp::Ne => a != b,
        BinOp::Lt => a < b,
        BinOp::Le => a <= b,
        BinOp::Gt => a > b,
        BinOp::Ge => a >= b,
        _ => return None,
    })
}

/// An expression whose value is often an integer: its [`Pure`] form when it has one, tried
/// first, and the general code, which decides whenever that answers nothing.
pub(crate) struct IntExpr {
    pub pure: Option<PureCode>,
    pub code: IntCode,
}

impl IntExpr {
    #[inline]
    pub(crate) fn eval(&self, f: &mut Frame) -> Result<IntOr, Stop> {
        if let Some(pure) = &self.pure {
            if let Some(value) = pure(f) {
                return Ok(Ok(value));
            }
        }
        (self.code)(f)
    }
}
