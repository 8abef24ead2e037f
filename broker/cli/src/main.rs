//! The `sluice` binary.

fn main() {
    println!("sluice: not yet");
}
