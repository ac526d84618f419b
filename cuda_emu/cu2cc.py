#!/usr/bin/env python3
"""cu2cc: turns a CUDA source file into host C++17 for the gearbox CUDA emulator.

Usage: cu2cc.py INPUT.cu OUTPUT.cc

Host C++ cannot parse three CUDA-only constructs; this pass rewrites exactly those and
copies every other byte unchanged:

  1. kernel launches  EXPR<<<grid, block[, shmem[, stream]]>>>(args...)  become
     ::gb_emu::launch(__FILE__, __LINE__, "EXPR", EXPR, grid, block, shmem, stream)(args...)
     (shmem and stream default to 0);
  2. extern __shared__ [__align__(N)] TYPE NAME[];  inside a function becomes
     TYPE *NAME = ::gb_emu::dynamic_shared<TYPE>();
  3. static __shared__ TYPE NAME[e1][e2], ...;  inside a function becomes, per declarator,
       static char gb_emu_site_NAME;
       auto &NAME = ::gb_emu::block_shared<TYPE[e1][e2]>(&gb_emu_site_NAME);
     (all on the declaration's line);
  4. every __global__ function's body starts with
       if (::gb_emu::bounds_probe()) return ::gb_emu::declare_bounds(__FILE__, __LINE__, B);
     where B are the arguments of its __launch_bounds__(B), which goes (none: no B): the
     launch helper calls the kernel once in that probe to learn its bounds, as the real
     build's are known to the driver, and refuses a larger block as CUDA does.

Line numbers survive: the output is a `#line 1 "<absolute input path>"` line followed by
the input, and no rewrite adds or removes a newline (a rewrite that swallows newlines
puts them back after its text), so diagnostics, __FILE__ and __LINE__ name the .cu.

Whatever else mentions __shared__ or <<< outside comments and literals is an error naming
file:line: a construct left alone would only fail later, less clearly, in g++.
"""
import bisect
import os
import sys

# ---- tokens -----------------------------------------------------------------------------

# Longest first. '>>' is deliberately absent: it closes two template argument lists, and
# '>>>' (the end of a launch configuration) is recognised as three adjacent '>' tokens.
PUNCTUATORS = ('<<<', '<<=', '>>=', '...', '->*', '::', '->', '<<', '<=', '>=', '==', '!=',
               '&&', '||', '++', '--', '+=', '-=', '*=', '/=', '%=', '&=', '|=', '^=',
               '##', '.*')
LITERAL_PREFIXES = ('', 'L', 'u', 'U', 'u8')
KEYWORDS = frozenset('''
    alignas alignof asm auto bool break case catch char char16_t char32_t class const
    const_cast constexpr continue decltype default delete do double dynamic_cast else enum
    explicit export extern false float for friend goto if inline int long mutable namespace
    new noexcept nullptr operator private protected public register reinterpret_cast return
    short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void
    volatile wchar_t while'''.split())
# Keywords that may be part of a __shared__ variable's type.
TYPE_KEYWORDS = frozenset('''auto bool char char16_t char32_t const decltype double float int
    long short signed typename unsigned void volatile wchar_t struct class union enum'''.split())


class PassError(Exception):
    """A construct the pass cannot rewrite; `pos` locates it in the input."""

    def __init__(self, pos, message):
        super().__init__(message)
        self.pos = pos
        self.message = message


class Token:
    __slots__ = ('kind', 'text', 'start', 'end', 'pp')

    def __init__(self, kind, text, start, end, pp):
        self.kind = kind      # 'id', 'num', 'str', 'chr' or 'punct'
        self.text = text
        self.start = start
        self.end = end
        self.pp = pp          # part of a preprocessor directive

    def __repr__(self):
        return f'Token({self.kind}, {self.text!r}, {self.start})'


def _is_id_start(c):
    return c.isalpha() or c in '_$' or ord(c) >= 0x80


def _is_id_char(c):
    return c.isalnum() or c in '_$' or ord(c) >= 0x80


def _splice_at(src, i):
    """Length of a backslash-newline (line splice) at i, or 0."""
    if src.startswith('\\\n', i):
        return 2
    if src.startswith('\\\r\n', i):
        return 3
    return 0


def _line_comment_end(src, i):
    """Index of the newline ending the // comment at i (a spliced newline continues it)."""
    while True:
        k = src.find('\n', i)
        if k < 0:
            return len(src)
        back = k - 1 if k > 0 and src[k - 1] == '\r' else k
        if back > 0 and src[back - 1] == '\\':
            i = k + 1
            continue
        return k


def _quoted_end(src, i, quote, pp):
    """End of the string or char literal whose opening quote is at i."""
    k = i + 1
    while k < len(src):
        c = src[k]
        if c == '\\':
            k += 2
            continue
        if c == quote:
            return k + 1
        if c == '\n':
            break
        k += 1
    if pp:   # an apostrophe in "#error don't": the directive is text, not tokens
        return _line_comment_end(src, i)
    raise PassError(i, 'unterminated %s literal' % ('string' if quote == '"' else 'character'))


def _raw_string_end(src, i):
    """End of the raw string literal whose opening quote is at i (R"delim( ... )delim")."""
    paren = src.find('(', i + 1)
    if paren < 0 or paren - i - 1 > 16:
        raise PassError(i, 'malformed raw string literal')
    closing = ')' + src[i + 1:paren] + '"'
    k = src.find(closing, paren + 1)
    if k < 0:
        raise PassError(i, 'unterminated raw string literal')
    return k + len(closing)


def _number_end(src, i):
    """End of the preprocessing number at i (digit separators and exponent signs included)."""
    k = i + 1
    n = len(src)
    while k < n:
        c = src[k]
        if c in 'eEpP' and k + 1 < n and src[k + 1] in '+-':
            k += 2
        elif _is_id_char(c) or c == '.':
            k += 1
        elif c == "'" and k + 1 < n and _is_id_char(src[k + 1]):
            k += 2
        else:
            break
    return k


def tokenize(src):
    """The tokens of src, comments and whitespace skipped; directive tokens marked pp."""
    toks = []
    i, n = 0, len(src)
    line_start, pp = True, False
    while i < n:
        c = src[i]
        if c == '\n':
            line_start, pp = True, False
            i += 1
            continue
        if c in ' \t\r\f\v':
            i += 1
            continue
        splice = _splice_at(src, i)
        if splice:
            i += splice
            continue
        if src.startswith('//', i):
            i = _line_comment_end(src, i)
            continue
        if src.startswith('/*', i):
            k = src.find('*/', i + 2)
            if k < 0:
                raise PassError(i, 'unterminated /* comment')
            i = k + 2
            continue
        if c == '#' and line_start:
            pp = True
        line_start = False
        kind, end = _token_at(src, i, pp)
        toks.append(Token(kind, src[i:end], i, end, pp))
        i = end
    return toks


def _token_at(src, i, pp):
    """The kind and end of the token that starts at i."""
    c = src[i]
    if _is_id_start(c):
        k = i + 1
        while k < len(src) and _is_id_char(src[k]):
            k += 1
        word = src[i:k]
        if k < len(src) and src[k] == '"' and word.endswith('R') and word[:-1] in LITERAL_PREFIXES:
            return 'str', _raw_string_end(src, k)
        if k < len(src) and src[k] in '"\'' and word in LITERAL_PREFIXES:
            return ('str' if src[k] == '"' else 'chr'), _quoted_end(src, k, src[k], pp)
        return 'id', k
    if c in '"\'':
        return ('str' if c == '"' else 'chr'), _quoted_end(src, i, c, pp)
    if c.isdigit() or (c == '.' and i + 1 < len(src) and src[i + 1].isdigit()):
        return 'num', _number_end(src, i)
    for p in PUNCTUATORS:
        if src.startswith(p, i):
            return 'punct', i + len(p)
    return 'punct', i + 1


# ---- helpers on token lists ----------------------------------------------------------------

def _joined(src, toks):
    """The tokens as one line: a space wherever the source separates them (comments drop)."""
    out = []
    for k, t in enumerate(toks):
        if k and toks[k - 1].end != t.start:
            out.append(' ')
        out.append(t.text)
    return ''.join(out)


def _is_name(t):
    return t.kind == 'id' and t.text not in KEYWORDS


def _triple_gt(toks, k):
    """Whether toks[k] starts '>>>' (three adjacent '>')."""
    if k + 2 >= len(toks):
        return False
    a, b, c = toks[k], toks[k + 1], toks[k + 2]
    return (a.text == b.text == c.text == '>' and a.end == b.start and b.end == c.start
            and not (a.pp or b.pp or c.pp))


def _shift_right(toks, k):
    """Whether toks[k] starts '>>' (two adjacent '>') that is not part of '>>>'."""
    return (k + 1 < len(toks) and toks[k].text == toks[k + 1].text == '>'
            and toks[k].end == toks[k + 1].start and not _triple_gt(toks, k))


def _opens_template(toks, k):
    """Whether the '<' at k opens template arguments (it follows a name)."""
    return k > 0 and toks[k - 1].kind == 'id' and toks[k - 1].text != 'operator'


# ---- scopes ---------------------------------------------------------------------------------

FUNCTION_TAIL = frozenset(('const', 'volatile', 'noexcept', 'override', 'final', 'mutable',
                           'constexpr', '&', '&&'))


def _is_function_head(head):
    """Whether the tokens before a '{' end like a function's (or lambda's) declarator."""
    if not head:
        return False
    depth, last_close = 0, -1
    for k, t in enumerate(head):
        if t.text == '(':
            depth += 1
        elif t.text == ')':
            depth -= 1
            if depth == 0:
                last_close = k
    if last_close >= 0:
        for t in head[last_close + 1:]:
            if t.text == '->':
                return True
            if t.text not in FUNCTION_TAIL:
                break
        else:
            return True
    return _ends_with_lambda_introducer(head)


def _ends_with_lambda_introducer(head):
    """`[captures] {`: a lambda without a parameter list (an array declarator follows a name)."""
    if head[-1].text != ']':
        return False
    depth = 0
    for k in range(len(head) - 1, -1, -1):
        depth += {']': 1, '[': -1}.get(head[k].text, 0)
        if depth == 0:
            return k == 0 or not (head[k - 1].kind == 'id' or head[k - 1].text in (')', ']'))
    return False


def _classify_brace(head):
    """What a '{' outside any function opens: 'namespace', 'function', 'class' or 'other'."""
    texts = [t.text for t in head]
    if 'namespace' in texts:
        return 'namespace'
    if len(head) == 2 and texts[0] == 'extern' and head[1].kind == 'str':
        return 'namespace'      # extern "C" { ... }
    if _is_function_head(head):
        return 'function'
    if any(x in ('struct', 'class', 'union', 'enum') for x in texts):
        return 'class'
    return 'other'              # an initializer list


def scopes_of_shared(toks):
    """For each __shared__ token index: the kind of scope it stands in ('function' for any
    block inside a function body)."""
    stack, saved_heads, head = [], [], []
    found = {}
    for idx, t in enumerate(toks):
        if t.pp:
            continue
        in_function = bool(stack) and stack[-1] == 'function'
        if t.text == '{':
            stack.append('function' if in_function else _classify_brace(head))
            saved_heads.append(head)
            head = []
        elif t.text == '}':
            if not stack:
                raise PassError(t.start, "unbalanced '}'")
            kind = stack.pop()
            outer = saved_heads.pop()
            head = outer + [t] if kind == 'other' else []
        elif t.text == ';' and not in_function:
            head = []
        elif not in_function:
            head.append(t)
        if t.kind == 'id' and t.text == '__shared__':
            found[idx] = stack[-1] if stack else 'namespace'
    return found


# ---- launches -------------------------------------------------------------------------------

def _template_open_before(toks, k):
    """Index of the '<' that opens the template arguments closed by the '>' at k."""
    angle = paren = 0
    while k >= 0:
        t = toks[k]
        if t.pp or t.text in (';', '{', '}'):
            break
        if t.text in (')', ']'):
            paren += 1
        elif t.text in ('(', '['):
            paren -= 1
            if paren < 0:
                break
        elif paren == 0 and t.text == '>':
            angle += 1
        elif paren == 0 and t.text == '<':
            angle -= 1
            if angle == 0:
                return k
        k -= 1
    return -1


def _callee_start(toks, k, where):
    """Index of the first token of the kernel expression that ends at k (before '<<<'):
    a name, a qualified name or a template-id."""
    while True:
        if toks[k].text == '>' and not toks[k].pp:
            k = _template_open_before(toks, k) - 1
            if k < 0:
                raise PassError(where, "cannot find the '<' of the kernel's template arguments "
                                "before '<<<'")
        if not _is_name(toks[k]) or toks[k].pp:
            raise PassError(where, "expected the kernel's name, a qualified name or a "
                            "template-id before '<<<', saw '%s'" % toks[k].text)
        if k == 0 or toks[k - 1].text != '::' or toks[k - 1].pp:
            return k
        p = k - 2
        if p >= 0 and not toks[p].pp and (_is_name(toks[p]) or toks[p].text == '>'):
            k = p
            continue
        return k - 1            # ::kernel


def _launch_config(toks, i, where):
    """The arguments of the configuration after the '<<<' at i, as (first, end) token index
    ranges, and the index of the first '>' of '>>>'. Commas and '>' count only outside
    parentheses, brackets, braces and template arguments; a comparison must be in
    parentheses."""
    args = []
    first = k = i + 1
    paren = angle = 0
    while k < len(toks):
        t = toks[k]
        if t.pp:
            raise PassError(t.start, "a preprocessor directive inside a launch configuration")
        if t.text == '<<<' or (t.kind == 'id' and t.text == '__shared__') or \
                (t.text == ';' and paren == 0):
            break
        if t.text in ('(', '[', '{'):
            paren += 1
        elif t.text in (')', ']', '}'):
            paren -= 1
            if paren < 0:
                break
        elif paren == 0:
            if t.text == '<' and _opens_template(toks, k):
                angle += 1
            elif t.text == '>' and angle > 0:
                angle -= 1
            elif _triple_gt(toks, k):
                args.append((first, k))
                return args, k
            elif _shift_right(toks, k):
                k += 1
            elif t.text in ('<', '>', '<=', '>=', '>>='):
                raise PassError(t.start, "'%s' in a launch configuration outside parentheses "
                                "(put a comparison in parentheses)" % t.text)
            elif t.text == ',' and angle == 0:
                args.append((first, k))
                first = k + 1
        k += 1
    raise PassError(where, "cannot find the '>>>' that ends this launch configuration")


def _launch_edit(src, toks, i):
    """The rewrite of the launch whose '<<<' is toks[i]: (start, end, text, next index)."""
    where = toks[i].start
    if i == 0:
        raise PassError(where, "'<<<' without a kernel before it")
    start = _callee_start(toks, i - 1, where)
    if start > 0 and toks[start - 1].text in ('.', '->', '.*', '->*', 'template'):
        raise PassError(where, "a kernel launched through '%s' (only a name, a qualified name "
                        "or a template-id can be launched)" % toks[start - 1].text)
    args, close = _launch_config(toks, i, where)
    for first, end in args:
        if first == end:
            raise PassError(where, 'an empty argument in a launch configuration')
    if not 2 <= len(args) <= 4:
        raise PassError(where, 'a launch configuration takes 2 to 4 arguments '
                        '(grid, block[, shmem[, stream]]); this one has %d' % len(args))
    after = close + 3
    if after >= len(toks) or toks[after].text != '(' or toks[after].pp:
        raise PassError(where, "expected '(' and the kernel's arguments after '>>>'")
    callee = src[toks[start].start:toks[i - 1].end]
    name = _joined(src, toks[start:i]).replace('\\', '\\\\').replace('"', '\\"')
    # verbatim: each config token keeps its line; only spaces next to <<< and >>> go
    config = src[toks[i].end:toks[close].start].strip(' \t')
    defaults = ', 0' * (4 - len(args))
    text = ('::gb_emu::launch(__FILE__, __LINE__, "%s", %s, %s%s)'
            % (name, callee, config, defaults))
    return toks[start].start, toks[close + 2].end, text, close + 3


# ---- __shared__ declarations -----------------------------------------------------------------

DROPPED_SPECIFIERS = ('extern', 'static', '__shared__', '__device__')
ALIGNMENT_SPECIFIERS = ('__align__', 'alignas')


def _declaration_bounds(toks, i):
    """Token indexes [s, e] of the declaration that holds the __shared__ at i; e is its ';'."""
    s = i
    while s > 0 and not toks[s - 1].pp and toks[s - 1].text not in (';', '{', '}', ':'):
        s -= 1
    depth = 0
    for e in range(i + 1, len(toks)):
        t = toks[e]
        if t.pp:
            raise PassError(t.start, 'a preprocessor directive inside a __shared__ declaration')
        if t.text in ('(', '['):
            depth += 1
        elif t.text in (')', ']'):
            depth -= 1
            if depth < 0:
                break
        elif t.text in ('{', '}', '<<<'):
            break
        elif depth == 0 and t.text == '=':
            raise PassError(t.start, 'a __shared__ variable cannot have an initializer')
        elif depth == 0 and t.text == ';':
            return s, e
    raise PassError(toks[i].start, "cannot parse this __shared__ declaration (expected "
                    "'[extern] __shared__ TYPE NAME[...], ...;')")


def _without_specifiers(toks, where):
    """The declaration's tokens less extern/static/__shared__/__device__ and __align__(N) or
    alignas(N) (the emulator chooses the alignment), and whether extern was among them."""
    kept, extern, k = [], False, 0
    while k < len(toks):
        t = toks[k]
        if t.text in ALIGNMENT_SPECIFIERS:
            k = _balanced_end(toks, k + 1, where) if k + 1 < len(toks) else k + 1
            continue
        if t.text in DROPPED_SPECIFIERS:
            extern = extern or t.text == 'extern'
        else:
            kept.append(t)
        k += 1
    return kept, extern


def _balanced_end(toks, k, where):
    """Index after the parenthesized group that starts at k."""
    if toks[k].text != '(':
        raise PassError(where, "expected '(' after %s" % toks[k - 1].text)
    depth = 0
    for j in range(k, len(toks)):
        depth += {'(': 1, ')': -1}.get(toks[j].text, 0)
        if depth == 0:
            return j + 1
    raise PassError(where, 'unbalanced parentheses')


def _split_declarators(toks):
    """Split at the commas outside (), [] and template arguments."""
    parts, current, depth, angle = [], [], 0, 0
    for k, t in enumerate(toks):
        if t.text in ('(', '['):
            depth += 1
        elif t.text in (')', ']'):
            depth -= 1
        elif depth == 0 and t.text == '<' and _opens_template(toks, k):
            angle += 1
        elif depth == 0 and t.text == '>' and angle > 0:
            angle -= 1
        elif depth == 0 and angle == 0 and t.text == ',':
            parts.append(current)
            current = []
            continue
        current.append(t)
    parts.append(current)
    return parts


def _parse_declarator(toks, where):
    """Split declarator tokens into (leading tokens, name token, [dimension token lists])."""
    dims, end = [], len(toks)
    while end > 0 and toks[end - 1].text == ']':
        depth, k = 0, end - 1
        while k >= 0:
            depth += {']': 1, '[': -1}.get(toks[k].text, 0)
            if depth == 0:
                break
            k -= 1
        if k < 0:
            raise PassError(where, "unbalanced '[' in a __shared__ declaration")
        dims.insert(0, toks[k + 1:end - 1])
        end = k
    if end == 0 or not _is_name(toks[end - 1]):
        raise PassError(where, 'cannot find the variable name in this __shared__ declaration')
    return toks[:end - 1], toks[end - 1], dims


def _check_type(src, toks, where):
    """Rejects what cannot be (part of) the type of a __shared__ variable."""
    if not toks:
        raise PassError(where, 'a __shared__ declaration without a type')
    for k, t in enumerate(toks):
        bad = (t.kind == 'id' and t.text in KEYWORDS and t.text not in TYPE_KEYWORDS) \
            or t.text in ('[', ']', '=', '{', '}') \
            or t.kind in ('str', 'chr') \
            or (t.text == '(' and (k == 0 or toks[k - 1].text != 'decltype')
                and not _inside_angles(toks, k))
        if bad:
            raise PassError(where, "unexpected '%s' in the type of a __shared__ declaration "
                            "('%s')" % (t.text, _joined(src, toks)))


def _inside_angles(toks, k):
    """Whether toks[k] lies inside template arguments (parentheses there are expressions)."""
    angle = 0
    for j in range(k):
        if toks[j].text == '<' and _opens_template(toks, j):
            angle += 1
        elif toks[j].text == '>' and angle > 0:
            angle -= 1
    return angle > 0


def _first_pointer(toks):
    """Index of the first '*', '&' or '&&' outside template arguments, or len(toks)."""
    angle = 0
    for k, t in enumerate(toks):
        if t.text == '<' and _opens_template(toks, k):
            angle += 1
        elif t.text == '>' and angle > 0:
            angle -= 1
        elif angle == 0 and t.text in ('*', '&', '&&'):
            return k
    return len(toks)


def _type_text(src, base, pointer):
    text = _joined(src, base)
    return text + ' ' + _joined(src, pointer) if pointer else text


def _declarators(src, toks, where):
    """(type text, name, [dimension texts]) per declarator of a declaration whose
    specifiers are gone: the first declarator's leading tokens up to its first '*' or '&'
    are the base type that all declarators share."""
    parts = _split_declarators(toks)
    out = []
    base = None
    for part in parts:
        lead, name, dims = _parse_declarator(part, where)
        if base is None:
            cut = _first_pointer(lead)
            base, pointer = lead[:cut], lead[cut:]
            _check_type(src, base, where)
        else:
            pointer = lead
        for t in pointer:
            if t.text not in ('*', '&', '&&', 'const', 'volatile', '__restrict__'):
                raise PassError(where, "unexpected '%s' before the name '%s' in a __shared__ "
                                "declaration" % (t.text, name.text))
        out.append((_type_text(src, base, pointer), name.text,
                    [_joined(src, d) for d in dims]))
    return out


def _dynamic_text(declarators, where):
    if len(declarators) != 1:
        raise PassError(where, 'extern __shared__ declares one unsized array at a time')
    type_text, name, dims = declarators[0]
    if dims != ['']:
        raise PassError(where, "extern __shared__ must declare an unsized one-dimensional "
                        "array, 'TYPE %s[]'" % name)
    return '%s *%s = ::gb_emu::dynamic_shared<%s>();' % (type_text, name, type_text)


def _static_text(declarators, where):
    out = []
    for type_text, name, dims in declarators:
        if '' in dims:
            raise PassError(where, "the __shared__ array '%s' has no size (only extern "
                            "__shared__ arrays are unsized)" % name)
        full = type_text + ''.join('[%s]' % d for d in dims)
        out.append('static char gb_emu_site_%s; auto &%s = ::gb_emu::block_shared<%s>'
                   '(&gb_emu_site_%s);' % (name, name, full, name))
    return ' '.join(out)


def _shared_edit(src, toks, i, scope):
    """The rewrite of the __shared__ declaration that holds toks[i]."""
    where = toks[i].start
    s, e = _declaration_bounds(toks, i)
    kept, extern = _without_specifiers(toks[s:e], where)
    if scope != 'function':
        if extern:
            raise PassError(where, 'extern __shared__ at namespace scope is not supported by '
                            'the emulator; declare it inside the kernel')
        raise PassError(where, '__shared__ variable %s is not supported by the emulator; '
                        'declare it inside the kernel' % (
                            'at namespace scope' if scope == 'namespace'
                            else 'outside a function body'))
    declarators = _declarators(src, kept, where)
    text = _dynamic_text(declarators, where) if extern else _static_text(declarators, where)
    start, end = toks[s].start, toks[e].end
    return start, end, text + '\n' * src.count('\n', start, end), e + 1


# ---- kernels: __launch_bounds__ --------------------------------------------------------------

def _kernel_edits(src, toks, i):
    """The rewrites of the __global__ function whose `__global__` is toks[i]: its
    __launch_bounds__ removed (newlines kept) and the probe put after its body's '{'."""
    where = toks[i].start
    s = i
    while s > 0 and not toks[s - 1].pp and toks[s - 1].text not in (';', '{', '}'):
        s -= 1
    edits, bounds, k = [], None, s
    params = None
    while k < len(toks) and not toks[k].pp:
        t = toks[k]
        if t.text == '__launch_bounds__':
            if k + 1 >= len(toks) or toks[k + 1].text != '(':
                raise PassError(t.start, "expected '(' after __launch_bounds__")
            end = _balanced_end(toks, k + 1, t.start)
            bounds = _joined(src, toks[k + 2:end - 1])
            edits.append((t.start, toks[end - 1].end,
                          '\n' * src.count('\n', t.start, toks[end - 1].end)))
            k = end
            continue
        if t.text == '__attribute__' and k + 1 < len(toks) and toks[k + 1].text == '(':
            k = _balanced_end(toks, k + 1, t.start)
            continue
        if t.text == '<' and _opens_template(toks, k):
            depth = 0
            while k < len(toks):
                depth += {'<': 1, '>': -1}.get(toks[k].text, 0)
                k += 1
                if depth == 0:
                    break
            continue
        if t.text == '(' and k > i:
            params = _balanced_end(toks, k, where)
            break
        k += 1
    if params is None:
        raise PassError(where, 'cannot find the parameter list of this __global__ function')
    k = params
    while k < len(toks) and toks[k].text not in ('{', ';') and not toks[k].pp:
        k += 1
    if k >= len(toks) or toks[k].pp:
        raise PassError(where, "expected the '{' or ';' that ends this __global__ function's "
                        "declaration")
    if toks[k].text == '{':
        args = ', ' + bounds if bounds else ''
        edits.append((toks[k].end, toks[k].end,
                      ' if (::gb_emu::bounds_probe()) return ::gb_emu::declare_bounds('
                      '__FILE__, __LINE__%s);' % args))
    return edits


# ---- the pass -------------------------------------------------------------------------------

def _check_directives(toks):
    for t in toks:
        if t.pp and (t.text == '<<<' or (t.kind == 'id' and t.text == '__shared__')):
            raise PassError(t.start, "'%s' in a preprocessor directive: the emulator's "
                            "pre-pass rewrites only code outside directives" % t.text)


def convert(src):
    """The rewritten text of src (without the leading #line)."""
    toks = tokenize(src)
    _check_directives(toks)
    scopes = scopes_of_shared(toks)
    edits = []
    k = 0
    while k < len(toks):
        t = toks[k]
        if t.pp:
            k += 1
        elif t.text == '<<<':
            start, end, text, k = _launch_edit(src, toks, k)
            edits.append((start, end, text))
        elif t.kind == 'id' and t.text == '__shared__':
            start, end, text, k = _shared_edit(src, toks, k, scopes[k])
            edits.append((start, end, text))
        else:
            if t.kind == 'id' and t.text == '__global__':
                edits.extend(_kernel_edits(src, toks, k))
            k += 1
    return _apply(src, edits)


def _apply(src, edits):
    out, at = [], 0
    for start, end, text in sorted(edits):
        if start < at:
            raise PassError(start, 'two rewrites overlap here (a launch or __shared__ '
                            'declaration inside another)')
        assert text.count('\n') == src.count('\n', start, end), 'a rewrite moved lines'
        out.append(src[at:start])
        out.append(text)
        at = end
    out.append(src[at:])
    return ''.join(out)


def _line_of(src, pos):
    return src.count('\n', 0, pos) + 1


def _source_line(src, pos):
    begin = src.rfind('\n', 0, pos) + 1
    end = src.find('\n', pos)
    return src[begin:end if end >= 0 else len(src)].strip()


def line_directive(path):
    quoted = os.path.abspath(path).replace('\\', '\\\\').replace('"', '\\"')
    return '#line 1 "%s"\n' % quoted


def main(argv):
    if len(argv) != 3:
        sys.stderr.write('usage: cu2cc.py INPUT.cu OUTPUT.cc\n')
        return 2
    source, target = argv[1], argv[2]
    with open(source, encoding='utf-8', errors='surrogateescape', newline='') as f:
        src = f.read()
    try:
        text = line_directive(source) + convert(src)
    except PassError as e:
        sys.stderr.write('%s:%d: error: %s\n    saw: %s\n' % (
            source, _line_of(src, e.pos), e.message, _source_line(src, e.pos)))
        if os.path.exists(target):
            os.remove(target)   # no stale output that a build could take as current
        return 1
    tmp = target + '.tmp'
    with open(tmp, 'w', encoding='utf-8', errors='surrogateescape', newline='') as f:
        f.write(text)
    os.replace(tmp, target)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
