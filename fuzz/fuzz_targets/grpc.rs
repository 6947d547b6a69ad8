//! Every gRPC method the plugin serves, called in-process through the real tonic services: framing,
//! protobuf decoding, the conversion to domain types, dispatch to the action a request names, the
//! guest call itself, and the answer's encoding.
//!
//! Input: byte 0 picks the method (bits 0–6) and the mode (bit 7); byte 1 is the size of the chunks the
//! body arrives in (0: one chunk).
//! - raw mode: the rest is the request body as sent (gRPC frames: flag, length, protobuf);
//! - message mode: byte 2 picks a loaded action for the `plugin` field; the rest, split at NUL bytes,
//!   fills fields 2, 3 and 4 (item, Backup or Restore, item from backup: every request has this shape),
//!   and a fourth part is the `plugin` field when byte 2 names no action. The message is framed here,
//!   so that the fuzzer mutates JSON rather than protobuf lengths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use velero_wasm_fuzz::{call, frame, message, plugin_host, METHODS};

// The host (stock modules compiled, test components loaded) is built before fuzzing starts, so that
// its compilation never counts against the first input's timeout.
fuzz_target!(init: { plugin_host(); }, |data: &[u8]| {
    let [selector, chunk, rest @ ..] = data else {
        return;
    };
    let host = plugin_host();
    let (method, streaming) = METHODS[usize::from(selector & 0x7f) % METHODS.len()];
    let body = if selector & 0x80 != 0 {
        bytes::Bytes::copy_from_slice(rest)
    } else {
        let [plugin, rest @ ..] = rest else {
            return;
        };
        let parts: Vec<&[u8]> = rest.splitn(4, |b| *b == 0).collect();
        let named = host.actions.get(usize::from(*plugin)).map(String::as_bytes);
        let plugin = named.or(parts.get(3).copied()).unwrap_or_default();
        let mut fields = vec![plugin];
        fields.extend(parts.iter().take(3));
        frame(&message(&fields))
    };
    let called = call(host, method, streaming, body, usize::from(*chunk));
    // Whatever arrives, the client gets an answer with a gRPC status, never a broken connection.
    assert_eq!(called.http_status, 200, "{method}: {called:?}");
    if !streaming {
        assert!(
            called.grpc_status.is_some(),
            "{method}: no grpc-status: {called:?}"
        );
    }
});
