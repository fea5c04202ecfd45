// asmemory: a wasmhist history provider in AssemblyScript, written from
// abi/SPEC.md alone, with the Extism AssemblyScript kit (@extism/as-pdk).
// It keeps a session's history in its state, {"messages": [...]}, as the Go
// in-memory plugin does, and declares ABI 1.0: provide answers by reference,
// store appends with a patch, clear replaces the state, and list pages by
// value with the element index as cursor. A cursor past the end is refused
// with invalid_argument, which a 1.0 plugin may do (SPEC section 4.4).

import { Host, Memory } from "@extism/as-pdk";
// The kit has no error function of its own: error_set is the kernel's.
import { error_set } from "@extism/as-pdk/lib/env";
import { Bytes, MAX_DEPTH, Scanner } from "./json";

const INFO =
  '{"name":"asmemory","version":"1.0.0","abi":"1.0","state_version":1,' +
  '"state_schema":{"type":"object","required":["messages"],"properties":{"messages":{"type":"array","items":{"type":"object"}}}},' +
  '"initial_state":{"messages":[]},"config_schema":{"type":"object"},"capabilities":[],' +
  '"omit_state":["provide","store","clear"]}';

// The page size of a list without a limit.
const DEFAULT_LIMIT: i32 = 100;

// The handler for AssemblyScript's abort (a failed assertion, an index out
// of range, a thrown error), routed here with --use abort=assembly/index/abort
// so that the module imports nothing from "env", which the host refuses
// (SPEC section 2). The call traps after the handler returns.
function abort(message: string | null, fileName: string | null, lineNumber: u32, columnNumber: u32): void {}

// The marker export (SPEC section 3): its name is the ABI major.
export function wasmhist_abi_v1(): i32 {
  return 0;
}

// Request is what a provider needs of a request: byte ranges into the
// input, -1 when a member is absent or null.
class Request {
  scanner: Scanner;
  stateStart: i32 = -1;
  stateEnd: i32 = -1;
  // Messages of request_messages then response_messages, as start and end
  // offsets, in the order store must keep them.
  messages: Array<i32> = [];
  responseStart: i32 = 0; // index in messages where response_messages begin
  cursor: string = "";
  limit: i32 = 0;

  constructor(input: Uint8Array) {
    this.scanner = new Scanner(input);
  }
}

// parse checks the request against SPEC section 7.1 and finds its members;
// on failure the scanner's err says why (invalid_argument).
function parse(input: Uint8Array): Request {
  const r = new Request(input);
  const d = r.scanner;
  d.ws();
  if (d.peek() != 0x7b) {
    d.fail(d.peek() < 0 ? "empty request" : "the request is not a JSON object");
    return r;
  }
  d.i++;
  d.ws();
  if (d.peek() == 0x7d) {
    d.i++;
  } else {
    while (true) {
      d.ws();
      const keyStart = d.i;
      if (d.peek() != 0x22) {
        d.fail("want a member name");
        return r;
      }
      if (!d.str()) return r;
      const key = d.stringAt(keyStart, d.i);
      if (!d.colon()) return r;
      d.ws();
      const start = d.i;
      if (!member(r, key, start)) return r;
      const more = d.next(0x7d);
      if (more < 0) return r;
      if (more == 0) break;
    }
  }
  if (!d.atEnd()) d.fail("data after the request");
  return r;
}

// member reads the value of one request member, starting at start.
function member(r: Request, key: string, start: i32): bool {
  const d = r.scanner;
  if (key == "session") return session(d);
  if (key == "request_messages" || key == "response_messages") {
    if (key == "response_messages") r.responseStart = r.messages.length;
    return messages(r, key);
  }
  if (!d.value(1)) return false;
  if (d.isNull(start)) return true; // null means absent (SPEC section 7.1)
  const c = d.b[start];
  if (key == "state") {
    r.stateStart = start;
    r.stateEnd = d.i;
  } else if (key == "cursor") {
    if (c != 0x22) return d.fail("cursor is not a string");
    r.cursor = d.stringAt(start, d.i);
  } else if (key == "limit") {
    return limit(r, start, d.i);
  }
  return true; // config, and members of later minors: ignored
}

// limit reads an integer: a JSON number without fraction or exponent. A
// negative limit reads as absent (SPEC section 7.1); one past 2^31 as the
// most a page could hold.
function limit(r: Request, start: i32, end: i32): bool {
  const b = r.scanner.b;
  let k = start;
  const negative = b[k] == 0x2d;
  if (negative) k++;
  let n: i64 = 0;
  for (; k < end; k++) {
    const c = b[k];
    if (c < 0x30 || c > 0x39) {
      r.scanner.i = start;
      return r.scanner.fail("limit is not an integer");
    }
    if (n < i32.MAX_VALUE) n = n * 10 + (c - 0x30);
  }
  r.limit = negative ? 0 : <i32>min(n, <i64>i32.MAX_VALUE);
  return true;
}

// session checks the session facts: an object whose session_id, state_key
// and service_session_id are strings (or null); its other members, which a
// later minor may add, may be any JSON value.
function session(d: Scanner): bool {
  const c = d.peek();
  if (c == 0x6e) return d.lit("null");
  if (c != 0x7b) {
    d.value(1);
    return d.fail("session is not an object");
  }
  d.i++;
  d.ws();
  if (d.peek() == 0x7d) {
    d.i++;
    return true;
  }
  while (true) {
    d.ws();
    const keyStart = d.i;
    if (d.peek() != 0x22) return d.fail("want a member name in session");
    if (!d.str()) return false;
    const key = d.stringAt(keyStart, d.i);
    if (!d.colon()) return false;
    d.ws();
    const start = d.i;
    if (!d.value(2)) return false;
    const c = d.b[start];
    if ((key == "session_id" || key == "state_key" || key == "service_session_id") && c != 0x22 && c != 0x6e) {
      return d.fail("session." + key + " is not a string");
    }
    const more = d.next(0x7d);
    if (more <= 0) return more == 0;
  }
}

// messages reads an array of message objects, recording each one's bytes.
function messages(r: Request, key: string): bool {
  const d = r.scanner;
  const c = d.peek();
  if (c == 0x6e) return d.lit("null");
  if (c != 0x5b) {
    d.value(1);
    return d.fail(key + " is not an array");
  }
  d.i++;
  d.ws();
  if (d.peek() == 0x5d) {
    d.i++;
    return true;
  }
  while (true) {
    d.ws();
    const start = d.i;
    if (d.peek() != 0x7b) {
      d.value(2);
      return d.fail("an element of " + key + " is not an object");
    }
    if (!d.object(2)) return false;
    r.messages.push(start);
    r.messages.push(d.i);
    const more = d.next(0x5d);
    if (more <= 0) return more == 0;
  }
}

// ok writes a response and returns 0.
function ok(out: Bytes): i32 {
  Host.output(out.bytes());
  return 0;
}

// fail writes an error (SPEC section 7) and returns 1. The block is the
// error's UTF-8 bytes exactly: error_set takes the whole block.
function fail(code: string, message: string): i32 {
  const e = new Bytes().ascii('{"code":').quoted(code).ascii(',"message":').quoted(message).ascii("}");
  const mem = Memory.allocateBytes(e.bytes());
  error_set(mem.offset);
  return 1;
}

function invalid(r: Request): i32 {
  return fail("invalid_argument", "asmemory: " + (r.scanner.err as string));
}

// describe accepts an empty input, white space, null or an object (SPEC
// section 4.1).
export function describe(): i32 {
  const d = new Scanner(Host.input());
  if (!d.atEnd()) {
    const c = d.peek();
    if (!d.value(0)) return fail("invalid_argument", "asmemory: describe: " + (d.err as string));
    if (!d.atEnd()) return fail("invalid_argument", "asmemory: describe: data after the request");
    if (c != 0x6e && c != 0x7b) return fail("invalid_argument", "asmemory: describe: the request is neither null nor an object");
  }
  return ok(new Bytes().ascii(INFO));
}

// provide selects the whole history from the state: the host resolves the
// pointer, so the history never crosses into the plugin.
export function provide(): i32 {
  const r = parse(Host.input());
  if (r.scanner.err !== null) return invalid(r);
  return ok(new Bytes().ascii('{"from_state":{"pointer":"/messages"}}'));
}

// store appends the request messages, then the response messages, each
// as the bytes it arrived as.
export function store(): i32 {
  const input = Host.input();
  const r = parse(input);
  if (r.scanner.err !== null) return invalid(r);
  const out = new Bytes();
  if (r.messages.length == 0) return ok(out.ascii("{}"));
  out.ascii('{"state_patch":[');
  for (let k = 0; k < r.messages.length; k += 2) {
    if (k > 0) out.ascii(",");
    out.ascii('{"op":"add","path":"/messages/-","value":').raw(input, r.messages[k], r.messages[k + 1]).ascii("}");
  }
  return ok(out.ascii("]}"));
}

// clear answers with the initial state (it never sees the state, so it
// cannot patch it: SPEC section 4.1).
export function clear(): i32 {
  const r = parse(Host.input());
  if (r.scanner.err !== null) return invalid(r);
  return ok(new Bytes().ascii('{"state":{"messages":[]}}'));
}

// list pages through the state's messages by value; a cursor is the index
// of the page's first message, in decimal.
export function list(): i32 {
  const input = Host.input();
  const r = parse(input);
  if (r.scanner.err !== null) return invalid(r);
  const all = stored(r);
  if (all === null) return fail("invalid_argument", "asmemory: list: " + (r.scanner.err as string));
  const n = all.length / 2;
  let start = 0;
  if (r.cursor.length > 0) {
    start = decodeCursor(r.cursor);
    if (start < 0) return fail("invalid_argument", "asmemory: list: cursor " + quote(r.cursor) + " is not one this plugin issued");
    if (start > n) return fail("invalid_argument", "asmemory: list: cursor " + quote(r.cursor) + " past the end");
  }
  const size = r.limit > 0 ? r.limit : DEFAULT_LIMIT;
  const end = <i32>min(<i64>start + size, <i64>n);
  const out = new Bytes().ascii('{"messages":[');
  for (let k = start; k < end; k++) {
    if (k > start) out.ascii(",");
    out.raw(input, all[2 * k], all[2 * k + 1]);
  }
  out.ascii("]");
  if (end < n) out.ascii(',"next_cursor":"' + end.toString() + '"');
  return ok(out.ascii("}"));
}

// stored finds the messages of the request's state, as start and end
// offsets; null when the state is not as the schema says.
function stored(r: Request): Array<i32> | null {
  const all: Array<i32> = [];
  if (r.stateStart < 0) return all;
  const d = new Scanner(r.scanner.b);
  d.i = r.stateStart;
  if (d.peek() != 0x7b) {
    d.fail("the state is not an object");
    r.scanner.err = d.err;
    return null;
  }
  d.i++;
  d.ws();
  if (d.peek() == 0x7d) return all;
  while (true) {
    d.ws();
    const keyStart = d.i;
    d.str();
    const key = d.stringAt(keyStart, d.i);
    d.colon();
    d.ws();
    if (key == "messages" && d.peek() == 0x5b) {
      d.i++;
      d.ws();
      if (d.peek() != 0x5d) {
        while (true) {
          d.ws();
          const start = d.i;
          d.value(2);
          all.push(start);
          all.push(d.i);
          if (d.next(0x5d) == 0) break;
        }
      } else {
        d.i++;
      }
    } else {
      d.value(1);
    }
    if (d.next(0x7d) <= 0) break;
  }
  return all;
}

// decodeCursor reads a cursor this plugin issued: decimal digits without a
// leading zero. -1 for anything else.
function decodeCursor(c: string): i32 {
  if (c.length > 9 || (c.length > 1 && c.charCodeAt(0) == 0x30)) return -1;
  let n = 0;
  for (let k = 0; k < c.length; k++) {
    const d = c.charCodeAt(k) - 0x30;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

function quote(s: string): string {
  const b = new Bytes().quoted(s);
  return String.UTF8.decodeUnsafe(b.buf.dataStart, b.n);
}

