//! What the attribute macros accept and reject, pinned with trybuild: the
//! right shapes compile (stateless and stateful, for each kind); a wrong
//! shape is a compile error spanned on the function that shows the
//! expected signature.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
