//! `call: grpc`: a unary method of a gRPC service, described by a `.proto` read at run time.
//! The `.proto` is compiled by protox (a protobuf compiler in Rust) into descriptors, once
//! per URI and definition revision; the arguments become the request message by reflection
//! (prost-reflect, the protobuf JSON mapping), and the answer goes back to JSON the same way.
//! No code is generated per workflow.
//!
//! The request goes over HTTP/2 (cleartext to any port but 443, TLS to 443), framed as gRPC
//! frames it. The answer's status is read from its headers (where a server puts it when it
//! answers with an error and no message); a message in the body is the answer. Streaming
//! methods are refused.

use std::path::Path;

use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MethodDescriptor};
use ratchet_core::ActivityError;
use serde_json::{json, Value};

use super::{communication, Credentials, GrpcTarget, MAX_RESPONSE_BYTES};

/// The largest `.proto` a call reads: 1 MiB.
pub(crate) const MAX_PROTO_BYTES: usize = 1 << 20;

/// The names of gRPC's status codes, by code.
const STATUS: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// One `.proto` (and Google's well-known types it may import) as protox reads files.
struct OneFile {
    name: String,
    source: String,
}

impl protox::file::FileResolver for OneFile {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name == self.name {
            return protox::file::File::from_source(name, &self.source);
        }
        protox::file::GoogleFileResolver::new().open_file(name)
    }
}

/// How deep a `.proto` may nest braces, brackets and parentheses (messages in messages,
/// option values): protox's parser recurses on each level, and a file of a thousand nested
/// messages would overflow the worker's stack.
pub(crate) const MAX_PROTO_NESTING: usize = 32;

/// The deepest nesting of `{`, `[` and `(` in a `.proto`, outside comments and strings.
fn nesting(source: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                chars.by_ref().find(|c| *c == '\n');
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' | '\'' => {
                while let Some(inner) = chars.next() {
                    match inner {
                        '\\' => {
                            chars.next();
                        }
                        q if q == c => break,
                        _ => {}
                    }
                }
            }
            '{' | '[' | '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' | ']' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Compiles the `.proto` `source` (named `name`) into descriptors.
pub(crate) fn compile(name: &str, source: &str) -> Result<DescriptorPool, String> {
    let deepest = nesting(source);
    if deepest > MAX_PROTO_NESTING {
        return Err(format!(
            "the .proto nests {deepest} levels deep; at most {MAX_PROTO_NESTING} are read"
        ));
    }
    let mut compiler = protox::Compiler::with_file_resolver(OneFile {
        name: name.to_string(),
        source: source.to_string(),
    });
    compiler.include_imports(true);
    compiler
        .open_file(name)
        .map_err(|e| format!("the .proto does not compile: {e}"))?;
    Ok(compiler.descriptor_pool())
}

/// The file name a `.proto`'s URI ends with (`greet.proto`), as protox names it.
pub(crate) fn file_name(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    match path.rsplit('/').next() {
        Some(last) if !last.is_empty() => last.to_string(),
        _ => "service.proto".to_string(),
    }
}

/// Reads a `file://` `.proto` under `dir`, and nowhere else.
pub(crate) fn read_file(dir: Option<&Path>, uri: &str) -> Result<String, ActivityError> {
    let Some(dir) = dir else {
        return Err(communication(format!(
            "{uri}: this worker reads no .proto files (start it with --grpc-protos DIR)"
        )));
    };
    let relative = uri.trim_start_matches("file://").trim_start_matches('/');
    let outside = || {
        communication(format!(
            "{uri}: not a file under the worker's --grpc-protos"
        ))
    };
    let root = dir.canonicalize().map_err(|_| outside())?;
    let path = root.join(relative).canonicalize().map_err(|_| outside())?;
    if !path.starts_with(&root) || !path.is_file() {
        return Err(outside());
    }
    let size = std::fs::metadata(&path).map_err(|_| outside())?.len();
    if size > MAX_PROTO_BYTES as u64 {
        return Err(communication(format!(
            "{uri}: larger than {MAX_PROTO_BYTES} bytes"
        )));
    }
    std::fs::read_to_string(&path).map_err(|e| communication(format!("{uri}: {e}")))
}

/// The method `target` names, unary.
fn method(pool: &DescriptorPool, target: &GrpcTarget) -> Result<MethodDescriptor, ActivityError> {
    let service = pool.get_service_by_name(&target.service).ok_or_else(|| {
        communication(format!(
            "the .proto {} has no service `{}` (give its full name, package.Service)",
            target.proto, target.service
        ))
    })?;
    let method = service
        .methods()
        .find(|m| m.name() == target.method)
        .ok_or_else(|| {
            communication(format!(
                "the service `{}` has no method `{}`",
                target.service, target.method
            ))
        })?;
    if method.is_client_streaming() || method.is_server_streaming() {
        return Err(communication(format!(
            "`{}/{}` streams; Ratchet calls unary gRPC methods only",
            target.service, target.method
        )));
    }
    Ok(method)
}

/// Decodes gRPC's percent-encoded `grpc-message`.
fn percent_decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Calls the method: `{statusCode: 200, content}` with the answer message as JSON (every
/// field, defaults included), or a communication error naming the gRPC status.
pub(crate) async fn call(
    client: &reqwest::Client,
    pool: &DescriptorPool,
    target: &GrpcTarget,
    auth: Option<&Credentials>,
    idempotency_key: &str,
) -> Result<Value, ActivityError> {
    let method = method(pool, target)?;
    let arguments = Value::Object(target.arguments.clone());
    let request = DynamicMessage::deserialize(method.input(), arguments).map_err(|e| {
        communication(format!(
            "the arguments are not a `{}`: {e}",
            method.input().full_name()
        ))
    })?;
    let message = request.encode_to_vec();
    let length = u32::try_from(message.len())
        .map_err(|_| communication("the request message is too large"))?;
    let mut frame = Vec::with_capacity(message.len() + 5);
    frame.push(0);
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&message);
    let scheme = if target.port == 443 { "https" } else { "http" };
    let host = if target.host.contains(':') {
        format!("[{}]", target.host)
    } else {
        target.host.clone()
    };
    let url = format!(
        "{scheme}://{host}:{}/{}/{}",
        target.port, target.service, target.method
    );
    let mut builder = client
        .post(&url)
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(frame);
    if !idempotency_key.is_empty() {
        builder = builder.header("idempotency-key", idempotency_key);
    }
    if matches!(auth, Some(Credentials::Digest { .. })) {
        return Err(ActivityError::non_retryable(
            super::AUTHORIZATION,
            "digest authentication is for `call: http` and `call: openapi`, not gRPC",
        ));
    }
    builder = super::http::authorized(builder, auth)?;
    let mut response = builder
        .send()
        .await
        .map_err(|e| communication(format!("{url}: {}", super::http::error_chain(&e))))?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if let Some(code) = header("grpc-status").and_then(|c| c.trim().parse::<usize>().ok()) {
        if code != 0 {
            let name = STATUS.get(code).copied().unwrap_or("UNKNOWN");
            let message = header("grpc-message")
                .map(|m| percent_decoded(&m))
                .unwrap_or_default();
            return Err(communication(format!(
                "{url} answered gRPC status {code} ({name}): {message}"
            )));
        }
    }
    let status = response.status().as_u16();
    if status != 200 {
        return Err(communication(format!("{url} answered HTTP {status}")));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| communication(format!("{url}: reading the answer: {e}")))?
    {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(communication(format!(
                "{url}: the answer is larger than {MAX_RESPONSE_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let Some((&compressed, rest)) = body.split_first() else {
        return Err(communication(format!(
            "{url} answered no message (a status sent in trailers is not read)"
        )));
    };
    if compressed != 0 {
        return Err(communication(format!(
            "{url} answered a compressed message; Ratchet asks for none"
        )));
    }
    let length = rest
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_be_bytes)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| communication(format!("{url}: a cut gRPC frame")))?;
    let message = rest
        .get(4..4 + length)
        .ok_or_else(|| communication(format!("{url}: a cut gRPC frame")))?;
    let answer = DynamicMessage::decode(method.output(), message).map_err(|e| {
        communication(format!(
            "{url}: the answer is not a `{}`: {e}",
            method.output().full_name()
        ))
    })?;
    let options = prost_reflect::SerializeOptions::new().skip_default_fields(false);
    let content = answer
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| communication(format!("{url}: the answer as JSON: {e}")))?;
    Ok(json!({"statusCode": 200, "content": content}))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GREET: &str = r#"
        syntax = "proto3";
        package GreeterApi;
        import "google/protobuf/timestamp.proto";
        service Greeter { rpc SayHello (HelloRequest) returns (HelloReply); }
        message HelloRequest { string name = 1; google.protobuf.Timestamp at = 2; }
        message HelloReply { string message = 1; int32 count = 2; }
    "#;

    #[test]
    fn a_proto_compiles_with_googles_types_and_names_its_methods() {
        let pool = compile("greet.proto", GREET).unwrap();
        let target = GrpcTarget {
            proto: "file://greet.proto".into(),
            proto_auth: None,
            revision: String::new(),
            service: "GreeterApi.Greeter".into(),
            host: "localhost".into(),
            port: 50051,
            method: "SayHello".into(),
            arguments: serde_json::Map::new(),
            auth: None,
        };
        let m = method(&pool, &target).unwrap();
        assert_eq!(m.input().full_name(), "GreeterApi.HelloRequest");
        let missing = GrpcTarget {
            method: "Nope".into(),
            ..target.clone()
        };
        assert!(method(&pool, &missing).is_err());
        let err = compile("bad.proto", "syntax = \"proto3\"; message {").unwrap_err();
        assert!(err.contains("does not compile"), "{err}");
    }

    #[test]
    fn a_deeply_nested_proto_is_refused_before_it_is_parsed() {
        // On a small stack, as a worker's: a thousand nested messages overflowed it.
        let refused = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(|| {
                let mut src = String::from("syntax = \"proto3\";\n");
                for i in 0..1000 {
                    src.push_str(&format!("message M{i} {{ "));
                }
                src.push_str(&"} ".repeat(1000));
                compile("deep.proto", &src).unwrap_err()
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(refused.contains("nests 1000 levels"), "{refused}");
        // Braces in comments and strings do not count.
        let commented = "// {{{{\n/* [[[ */ syntax = \"proto3\"; message A { string s = 1 [json_name = \"{{{\"]; }";
        assert_eq!(nesting(commented), 2);
        assert!(compile("a.proto", commented).is_ok());
    }

    #[test]
    fn file_protos_stay_under_their_directory() {
        let dir = std::env::temp_dir().join(format!("ratchet-protos-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("app")).unwrap();
        std::fs::write(dir.join("app/greet.proto"), GREET).unwrap();
        assert!(read_file(Some(&dir), "file://app/greet.proto").is_ok());
        assert!(read_file(Some(&dir), "file://../../etc/passwd").is_err());
        assert!(read_file(None, "file://app/greet.proto").is_err());
        assert_eq!(file_name("https://x/protos/greet.proto?v=2"), "greet.proto");
        assert_eq!(percent_decoded("no%20such%20user"), "no such user");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
