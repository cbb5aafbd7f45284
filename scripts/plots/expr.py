"""The inline markers' expressions:  <!-- v:EXPR|FMT -->TEXT<!-- /v -->

EXPR   arithmetic (+ - * / and ** for powers, parentheses, numbers, min(..), max(..), abs(..), len(..)) over references
       {FILE:PATH}; FILE is a results file under results/ without .json (nvidia-h200/day10_matmul). One comparison
       (< > <= >=) makes a true/false value, and all(..) / any(..) join such values: a sentence's verdict
       ("saved more than the spread") is then computed from the files, like its figures.
PATH   dotted keys (config.loss_curve.seconds; a key in double quotes may hold dots and brackets:
       graphs."embedding (one-hot . wte) 16384x256x384".engine), integer indexes ([0], [-1]) and list filters
       ([name=x,shape=4096x4096x4096]: '=' exact, '~=' substring, a list value joined by 'x'); a filter
       must select exactly one element; a value may hold balanced brackets ([name=14_stream_k [s4 c2 tail]]).
FMT    a Python format spec (.1f, ,.0f, .2e, d, .0%); empty: str(value); `met` writes a goal's boolean as
       "met" or "missed", so a sentence that says whether a goal was reached cannot go stale either;
       `either:A/B` writes A for true and B for false (A and B hold no '/'), for any other verdict.
"""
import re

FUNCS = {"min": min, "max": max, "abs": abs, "len": len, "all": all, "any": any}
COMPARE = {"<": lambda a, b: a < b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}


class ExprError(Exception):
    pass


def _split_filter(body):
    """'name=a, b,shape=1x2' -> [('name','=','a, b'), ('shape','=','1x2')]: a comma starts a new condition
    only before 'key=' or 'key~=', so values may hold commas ("generate, batch 1, KV cache")."""
    conds = []
    for part in re.split(r",(?=\s*[A-Za-z_][\w.]*\s*~?=)", body):
        m = re.fullmatch(r"\s*([A-Za-z_][\w.]*)\s*(~?=)(.*)", part, re.S)
        if not m:
            raise ExprError(f"bad filter condition {part!r}")
        conds.append((m.group(1), m.group(2), m.group(3).strip()))
    return conds


def _field(elem, key):
    for k in key.split("."):
        if not isinstance(elem, dict) or k not in elem:
            return None
        elem = elem[k]
    return elem


def _as_text(v):
    if isinstance(v, list):
        return "x".join(str(x) for x in v)
    return str(v)


def _apply_filter(value, body, where):
    if not isinstance(value, list):
        raise ExprError(f"filter [{body}] on something that is not a list ({where})")
    conds = _split_filter(body)
    hits = []
    for elem in value:
        ok = True
        for key, op, want in conds:
            got = _field(elem, key)
            if got is None or not (_as_text(got) == want if op == "=" else want in _as_text(got)):
                ok = False
                break
        if ok:
            hits.append(elem)
    if len(hits) != 1:
        raise ExprError(f"filter [{body}] selects {len(hits)} elements of {where}, not exactly one")
    return hits[0]


def resolve(data, path, where):
    """Follow PATH into a results file's data."""
    i, cur, seen = 0, data, where
    while i < len(path):
        c = path[i]
        if c == ".":
            i += 1
            continue
        if c == "[":
            j, depth = i, 0  # the matching ']': a filter's value may hold brackets ("14_stream_k [s4 c2 tail]")
            while j < len(path):
                depth += {"[": 1, "]": -1}.get(path[j], 0)
                if depth == 0:
                    break
                j += 1
            if depth:  # unbalanced ("[name~=12_wgmma_tma_store [s4,...]"): the first ']' closes the filter
                j = path.find("]", i)
            if j < 0:
                raise ExprError(f"unclosed '[' in {path!r}")
            body = path[i + 1:j]
            if re.fullmatch(r"-?\d+", body.strip()):
                if not isinstance(cur, list):
                    raise ExprError(f"index [{body}] on something that is not a list ({seen})")
                k = int(body)
                if not -len(cur) <= k < len(cur):
                    raise ExprError(f"index [{body}] outside a list of {len(cur)} ({seen})")
                cur = cur[k]
            else:
                cur = _apply_filter(cur, body, seen)
            seen += f"[{body}]"
            i = j + 1
            continue
        if c == '"':  # a quoted key may hold dots and brackets ("embedding (one-hot . wte) 16384x256x384")
            j = path.find('"', i + 1)
            if j < 0:
                raise ExprError(f"unclosed '\"' in {path!r}")
            key = path[i + 1:j]
            if not isinstance(cur, dict) or key not in cur:
                raise ExprError(f"no key {key!r} in {seen}")
            cur = cur[key]
            seen += "." + key
            i = j + 1
            continue
        m = re.compile(r"[^.\[\]]+").match(path, i)
        if m is None:  # e.g. a ']' inside a filter's value ended the filter early
            raise ExprError(f"cannot read {path[i:]!r} in {path!r} (a filter's value may not contain ']')")
        key = m.group(0)
        if not isinstance(cur, dict) or key not in cur:
            raise ExprError(f"no key {key!r} in {seen}")
        cur = cur[key]
        seen += "." + key
        i = m.end()
    return cur


TOKEN = re.compile(r"\s*(?:(\{[^{}]*\})|(\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)|([A-Za-z_]\w*)|(.))")


def tokenize(expr):
    toks, pos = [], 0
    expr = expr.rstrip()
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        ref, num, name, op = m.groups()
        if ref:
            toks.append(("ref", ref[1:-1]))
        elif num:
            toks.append(("num", float(num) if any(c in num for c in ".eE") else int(num)))
        elif name:
            if name not in FUNCS:
                raise ExprError(f"unknown function {name!r} (min, max, abs, len, all, any)")
            toks.append(("fn", name))
        elif op == "*" and expr.startswith("**", m.end() - 1):
            toks.append(("op", "**"))
            pos = m.end() + 1
            continue
        elif op is not None and op in "<>":
            two = expr.startswith("=", m.end())
            toks.append(("cmp", op + "=" if two else op))
            pos = m.end() + (1 if two else 0)
            continue
        elif op is not None and op in "+-*/(),":
            toks.append(("op", op))
        elif op is not None:
            raise ExprError(f"unexpected {op!r} in {expr!r}")
        pos = m.end()
    return toks


class _Parser:
    """compare := expr (('<'|'>'|'<='|'>=') expr)?, a true/false value (one comparison: a < b < c is refused);
    expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*; unary := '-' unary | power;
    power := atom ('**' unary)?  (as in Python: -2**2 = -4, 2**-1 = 0.5); atom := number | {ref} | fn '(' compare (',' compare)* ')' | '(' compare ')'."""

    def __init__(self, toks, lookup):
        self.toks, self.i, self.lookup = toks, 0, lookup

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, want=None):
        t = self.peek()
        if t[0] is None or (want is not None and t != ("op", want)):
            raise ExprError(f"expected {want or 'more'} at token {self.i + 1}")
        self.i += 1
        return t

    def compare(self):
        v = self.expr()
        if self.peek()[0] == "cmp":
            op = self.take()[1]
            v = COMPARE[op](_num(v), _num(self.expr()))
            if self.peek()[0] == "cmp":
                raise ExprError("one comparison at a time: join verdicts with all(..) or any(..)")
        return v

    def expr(self):
        v = self.term()
        while self.peek() in (("op", "+"), ("op", "-")):
            op = self.take()[1]
            r = self.term()
            v = _num(v) + _num(r) if op == "+" else _num(v) - _num(r)
        return v

    def term(self):
        v = self.unary()
        while self.peek() in (("op", "*"), ("op", "/")):
            op = self.take()[1]
            r = self.unary()
            if op == "/" and _num(r) == 0:
                raise ExprError("division by zero")
            v = _num(v) * _num(r) if op == "*" else _num(v) / _num(r)
        return v

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take()
            return -_num(self.unary())
        v = self.atom()
        if self.peek() == ("op", "**"):
            self.take()
            v = _num(v) ** _num(self.unary())
        return v

    def atom(self):
        kind, val = self.take()
        if kind == "num":
            return val
        if kind == "ref":
            return self.lookup(val)
        if kind == "fn":
            self.take("(")
            args = [self.compare()]
            while self.peek() == ("op", ","):
                self.take()
                args.append(self.compare())
            self.take(")")
            if val == "len":
                if len(args) != 1 or not isinstance(args[0], (list, dict, str)):
                    raise ExprError("len() takes one list")
                return len(args[0])
            if val in ("all", "any"):
                if not all(isinstance(a, bool) for a in args):
                    raise ExprError(f"{val}() joins true/false values (comparisons)")
                return FUNCS[val](args)
            args = [_num(a) for a in args]
            return abs(*args) if val == "abs" else FUNCS[val](args)
        if (kind, val) == ("op", "("):
            v = self.compare()
            self.take(")")
            return v
        raise ExprError(f"unexpected {val!r}")


def _num(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ExprError(f"{v!r} is not a number")
    return v


def evaluate(expr, files):
    """The value of EXPR; files.get(name) gives a results file's data (KeyError when there is none)."""
    def lookup(ref):
        if ":" not in ref:
            raise ExprError(f"reference {{{ref}}} has no ':' between file and path")
        name, path = ref.split(":", 1)
        try:
            data = files.get(name.strip())
        except KeyError as e:
            raise ExprError(str(e).strip("'\""))
        return resolve(data, path.strip(), name.strip())

    p = _Parser(tokenize(expr), lookup)
    v = p.compare()
    if p.i != len(p.toks):
        raise ExprError(f"unexpected {p.toks[p.i][1]!r} after the expression")
    return v


def render(value, spec):
    """format(value, FMT); a whole float with 'd' is written as an integer, empty FMT is str()."""
    if spec == "":
        return str(value)
    if spec == "met":
        if not isinstance(value, bool):
            raise ExprError(f"format 'met' needs a true/false value, got {value!r}")
        return "met" if value else "missed"
    if spec.startswith("either:"):
        words = spec[len("either:"):].split("/")
        if len(words) != 2:
            raise ExprError(f"format {spec!r}: either:A/B names two texts, for true and for false")
        if not isinstance(value, bool):
            raise ExprError(f"format 'either' needs a true/false value, got {value!r}")
        return words[0] if value else words[1]
    if spec.endswith("d") and isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        return format(value, spec)
    except (ValueError, TypeError) as e:
        raise ExprError(f"format {spec!r} does not fit {value!r} ({e})")
