// A JSON scanner over the bytes of a request: it checks that they are one
// JSON text (RFC 8259) and finds the members a provider needs, as byte
// ranges, without building values. Messages stay opaque: they are copied
// from the request to the response byte for byte (SPEC section 6).

// The most arrays and objects a document may have open at once; a deeper
// document is answered with invalid_argument, never a trap (SPEC section
// 11.2 and 7.1), as the Go SDK's decoder does.
export const MAX_DEPTH: i32 = 1000;

export class Scanner {
  b: Uint8Array;
  i: i32 = 0;
  err: string | null = null;

  constructor(b: Uint8Array) {
    this.b = b;
  }

  fail(what: string): bool {
    if (this.err === null) this.err = what + " at byte " + this.i.toString();
    return false;
  }

  peek(): i32 {
    return this.i < this.b.length ? <i32>this.b[this.i] : -1;
  }

  ws(): void {
    while (this.i < this.b.length) {
      const c = this.b[this.i];
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) return;
      this.i++;
    }
  }

  // atEnd reports whether only white space is left.
  atEnd(): bool {
    this.ws();
    return this.i == this.b.length;
  }

  // value moves past one JSON value, checking it.
  value(depth: i32): bool {
    this.ws();
    const c = this.peek();
    if (c == 0x7b) return this.object(depth);
    if (c == 0x5b) return this.array(depth);
    if (c == 0x22) return this.str();
    if (c == 0x74) return this.lit("true");
    if (c == 0x66) return this.lit("false");
    if (c == 0x6e) return this.lit("null");
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.num();
    if (c < 0) return this.fail("unexpected end of input");
    return this.fail("unexpected character");
  }

  private open(depth: i32): bool {
    if (depth >= MAX_DEPTH) return this.fail("nested deeper than " + MAX_DEPTH.toString());
    this.i++;
    return true;
  }

  object(depth: i32): bool {
    if (!this.open(depth)) return false;
    this.ws();
    if (this.peek() == 0x7d) {
      this.i++;
      return true;
    }
    while (true) {
      this.ws();
      if (this.peek() != 0x22) return this.fail("want a member name");
      if (!this.str()) return false;
      if (!this.colon()) return false;
      if (!this.value(depth + 1)) return false;
      const more = this.next(0x7d);
      if (more <= 0) return more == 0;
    }
  }

  array(depth: i32): bool {
    if (!this.open(depth)) return false;
    this.ws();
    if (this.peek() == 0x5d) {
      this.i++;
      return true;
    }
    while (true) {
      if (!this.value(depth + 1)) return false;
      const more = this.next(0x5d);
      if (more <= 0) return more == 0;
    }
  }

  colon(): bool {
    this.ws();
    if (this.peek() != 0x3a) return this.fail("want ':'");
    this.i++;
    return true;
  }

  // next moves past a ',' (1) or the closing byte (0); -1 on anything else.
  next(close: i32): i32 {
    this.ws();
    const c = this.peek();
    if (c == 0x2c) {
      this.i++;
      return 1;
    }
    if (c == close) {
      this.i++;
      return 0;
    }
    this.fail(c < 0 ? "unexpected end of input" : "want ',' or a closing bracket");
    return -1;
  }

  lit(word: string): bool {
    for (let k = 0; k < word.length; k++) {
      if (this.peek() != word.charCodeAt(k)) return this.fail("invalid literal");
      this.i++;
    }
    return true;
  }

  private digits(): i32 {
    let n = 0;
    while (this.peek() >= 0x30 && this.peek() <= 0x39) {
      this.i++;
      n++;
    }
    return n;
  }

  num(): bool {
    if (this.peek() == 0x2d) this.i++;
    if (this.peek() == 0x30) this.i++;
    else if (this.digits() == 0) return this.fail("invalid number");
    if (this.peek() == 0x2e) {
      this.i++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    if (this.peek() == 0x65 || this.peek() == 0x45) {
      this.i++;
      if (this.peek() == 0x2b || this.peek() == 0x2d) this.i++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    return true;
  }

  // str moves past a string, checking its escapes. The input is
  // well-formed UTF-8 (SPEC section 2.3), so bytes above 0x7f pass as they
  // are.
  str(): bool {
    this.i++;
    while (true) {
      const c = this.peek();
      if (c < 0) return this.fail("unterminated string");
      this.i++;
      if (c == 0x22) return true;
      if (c < 0x20) return this.fail("control character in a string");
      if (c != 0x5c) continue;
      const e = this.peek();
      this.i++;
      if (e == 0x75) {
        for (let k = 0; k < 4; k++) {
          if (hex(this.peek()) < 0) return this.fail("invalid \\u escape");
          this.i++;
        }
      } else if (e != 0x22 && e != 0x5c && e != 0x2f && e != 0x62 && e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74) {
        return this.fail("invalid escape");
      }
    }
  }

  // stringAt decodes the string whose opening quote is at start (already
  // checked by str) into an AssemblyScript string.
  stringAt(start: i32, end: i32): string {
    let s = "";
    let k = start + 1;
    const last = end - 1;
    let runStart = k;
    while (k < last) {
      const c = this.b[k];
      if (c != 0x5c) {
        k++;
        continue;
      }
      s += String.UTF8.decodeUnsafe(this.b.dataStart + runStart, k - runStart);
      const e = this.b[k + 1];
      k += 2;
      if (e == 0x75) {
        let u = 0;
        for (let j = 0; j < 4; j++) u = (u << 4) | hex(this.b[k + j]);
        k += 4;
        s += String.fromCharCode(u);
      } else if (e == 0x62) s += "\b";
      else if (e == 0x66) s += "\f";
      else if (e == 0x6e) s += "\n";
      else if (e == 0x72) s += "\r";
      else if (e == 0x74) s += "\t";
      else s += String.fromCharCode(e);
      runStart = k;
    }
    return s + String.UTF8.decodeUnsafe(this.b.dataStart + runStart, last - runStart);
  }

  // isNull reports whether the value at [start, end) is null.
  isNull(start: i32): bool {
    return this.b[start] == 0x6e;
  }
}

function hex(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

// Bytes is a growable byte buffer for a response.
export class Bytes {
  buf: Uint8Array = new Uint8Array(256);
  n: i32 = 0;

  private grow(more: i32): void {
    if (this.n + more <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + more) size *= 2;
    const next = new Uint8Array(size);
    memory.copy(next.dataStart, this.buf.dataStart, this.n);
    this.buf = next;
  }

  // ascii appends a string of ASCII characters.
  ascii(s: string): Bytes {
    this.grow(s.length);
    for (let k = 0; k < s.length; k++) this.buf[this.n++] = <u8>s.charCodeAt(k);
    return this;
  }

  // raw appends bytes [start, end) of src.
  raw(src: Uint8Array, start: i32, end: i32): Bytes {
    this.grow(end - start);
    memory.copy(this.buf.dataStart + this.n, src.dataStart + start, end - start);
    this.n += end - start;
    return this;
  }

  // quoted appends s as a JSON string. Everything outside printable ASCII
  // is written as a \u escape, so the bytes are ASCII whatever s holds
  // (an unpaired surrogate included: SPEC section 2.3).
  quoted(s: string): Bytes {
    this.ascii('"');
    for (let k = 0; k < s.length; k++) {
      const c = s.charCodeAt(k);
      if (c == 0x22 || c == 0x5c) {
        this.ascii("\\");
        this.grow(1);
        this.buf[this.n++] = <u8>c;
      } else if (c < 0x20 || c > 0x7e) {
        let h = c.toString(16);
        while (h.length < 4) h = "0" + h;
        this.ascii("\\u" + h);
      } else {
        this.grow(1);
        this.buf[this.n++] = <u8>c;
      }
    }
    return this.ascii('"');
  }

  // bytes is a new array of exactly the bytes written, starting at offset
  // 0 of its buffer: the PDK's Host.output reads an array's buffer from
  // its start, whatever the array's own offset (SPEC section 11.2).
  bytes(): Uint8Array {
    const out = new Uint8Array(this.n);
    memory.copy(out.dataStart, this.buf.dataStart, this.n);
    return out;
  }
}
