//! lang (to be written)
