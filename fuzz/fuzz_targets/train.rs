#![no_main]
// See rust/fuzzing.rs for what this target checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| bpe::fuzzing::train(data));
