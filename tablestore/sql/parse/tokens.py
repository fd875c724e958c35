"""Tokens of a SQL script, statement splitting, and a cursor for the statement parser.

sqlglot's Spark tokenizer does the lexing, so quoting, comments and string escapes follow
Spark SQL; every token keeps its line, column and offsets, so errors point at the user's text.

A script is lexed once. Each statement gets its run of the script's tokens, moved to count
from the statement's own start (:func:`relocate`), which is what lexing its text alone would
give; a query inside a statement keeps its run of the statement's tokens, and sqlglot's parser
reads the query from them, moved to count from the query's start (:func:`parse_tokens`),
instead of lexing it again, so its errors keep the positions they had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from tablestore.errors import ParseError

_DIALECT = Spark()


class _Tokenizer(Spark.Tokenizer):
    # sqlglot swallows the rest of SHOW ... as one string; we parse SHOW statements ourselves.
    COMMANDS = set()


def tokenize(sql: str) -> list[Token]:
    try:
        return list(_Tokenizer(dialect=_DIALECT).tokenize(sql))
    except TokenError as e:
        raise ParseError(f"cannot read the statement: {e}", sql=sql) from None


@dataclass(frozen=True)
class StatementText:
    """One statement of a script: its text and where it starts in the script."""

    text: str
    line: int
    tokens: tuple[Token, ...]


def split_statements(script: str) -> list[StatementText]:
    """Statements separated by ``;`` (semicolons in strings and comments do not split)."""
    tokens = tokenize(script)
    out: list[StatementText] = []
    current: list[Token] = []
    after_separator = 0  # where the text before the current statement begins
    for token in [*tokens, None]:
        if token is None or token.token_type == TokenType.SEMICOLON:
            if current:
                start, end = current[0].start, current[-1].end + 1
                text = script[start:end]
                following = token.start if token is not None else len(script)
                lexed = relocate(current) if lexed_alone(script, current, after_separator, following) else None
                out.append(StatementText(text, current[0].line, lexed or tuple(tokenize(text))))
            current = []
            after_separator = token.end + 1 if token is not None else len(script)
        else:
            current.append(token)
    return out


def lexed_alone(sql: str, run: Sequence[Token], before: int, after: int) -> bool:
    """Whether lexing ``run``'s own text alone gives ``run`` again, moved (:func:`relocate`):
    ``run`` is a run of the tokens of ``sql`` with nothing but ``sql[before:after]`` around it
    that lexing saw. When not, only lexing that text again can tell its tokens.

    sqlglot attaches a comment to the token before it on the same line, else to the next
    token, so a comment next to the run (between ``before`` and its first token, or between
    its last token and ``after``) may sit on a token of the run; its own text would not have
    it. A first token spanning lines would leave the columns of the first line unknown.
    """
    first, last = run[0], run[-1]
    if before > first.start:
        return False  # the run starts inside a token (sqlglot reads 21L as the tokens 21 :: L)
    if sql[before:first.start].strip() or sql[last.end + 1:after].strip():
        return False
    return "\n" not in sql[first.start:first.end + 1] and "\r" not in sql[first.start:first.end + 1]


def relocate(run: Sequence[Token]) -> tuple[Token, ...]:
    """Copies of ``run`` with offsets counted from its first token's start, lines from that
    token's line and, on that line, columns from its column.

    A token's line and column are those of its last character (sqlglot's), so the first
    token's column less its length is how far into its line the run begins.
    """
    first = run[0]
    lines_before = first.line - 1
    shift = first.col - (first.end - first.start + 1)
    return tuple(
        Token(t.token_type, t.text, t.line - lines_before, t.col - shift if t.line == first.line else t.col,
              t.start - first.start, t.end - first.start, list(t.comments))
        for t in run
    )


def parse_tokens(sql: str, tokens: Sequence[Token]) -> exp.Expr:
    """sqlglot's Spark parse of ``sql`` from its ``tokens`` (a run of tokens whose own text is
    ``sql`` and that :func:`lexed_alone` accepts; moved here to count from ``sql``'s start),
    with what ``sqlglot.parse_one(sql, read="spark")`` returns or raises: a statement, a Block of
    several, or sqlglot's ParseError."""
    # The parser may keep a token's comment list in the tree it builds: it gets copies, so the
    # tokens a statement carries stay as they are however often the statement runs.
    result = _DIALECT.parser().parse(list(relocate(tokens)), sql)
    if not result or result[0] is None:
        raise SqlglotParseError(f"No expression was parsed from '{sql}'")
    return exp.Block(expressions=result) if len(result) > 1 else result[0]


def token_column(token: Token) -> int:
    """1-based column of the token's first character (sqlglot reports the last)."""
    return max(1, token.col - len(token.text) + 1)


class Cursor:
    """A position in a statement's tokens with the small vocabulary a recursive parser needs."""

    def __init__(self, statement: StatementText) -> None:
        self.sql = statement.text
        self.tokens = list(statement.tokens)
        self.pos = 0
        self.line_offset = statement.line - 1

    # -- looking --------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def is_type(self, token_type: TokenType, ahead: int = 0) -> bool:
        """Whether the token ``ahead`` is of ``token_type`` (False past the end)."""
        token = self.peek(ahead)
        return token is not None and token.token_type == token_type

    def next_text(self) -> str:
        """The text of the next token, as an error message quotes it ('' past the end)."""
        token = self.peek()
        return token.text if token is not None else ""

    def word(self, ahead: int = 0) -> str:
        """The upper-cased text of a token (keywords and identifiers alike)."""
        token = self.peek(ahead)
        if token is None:
            return ""
        if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            return ""  # quoted text is never a keyword
        return token.text.upper()

    def is_word(self, *words: str) -> bool:
        """Whether the next tokens spell ``words`` (``PARTITIONED BY`` may be one token)."""
        joined = " ".join(words).upper()
        token = self.peek()
        if token is not None and self.word() == joined:
            return True
        return all(self.word(i) == w.upper() for i, w in enumerate(words))

    # -- taking -----------------------------------------------------------------------------
    def advance(self) -> Token:
        token = self.peek()
        if token is None:
            raise self.error("the statement ends too early")
        self.pos += 1
        return token

    def accept(self, *words: str) -> bool:
        joined = " ".join(words).upper()
        if self.peek() is not None and self.word() == joined:
            self.pos += 1
            return True
        if all(self.word(i) == w.upper() for i, w in enumerate(words)):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            found = self.peek()
            what = repr(found.text) if found is not None else "the end of the statement"
            raise self.error(f"expected {' '.join(words)} but found {what}")

    def accept_type(self, token_type: TokenType) -> Token | None:
        token = self.peek()
        if token is not None and token.token_type == token_type:
            self.pos += 1
            return token
        return None

    def expect_type(self, token_type: TokenType, what: str) -> Token:
        token = self.accept_type(token_type)
        if token is None:
            found = self.peek()
            raise self.error(f"expected {what} but found {repr(found.text) if found else 'the end of the statement'}")
        return token

    def identifier(self, what: str = "a name") -> str:
        token = self.peek()
        if token is None or token.token_type in (
            TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA,
            TokenType.DOT, TokenType.EQ, TokenType.SEMICOLON,
        ):
            found = repr(token.text) if token is not None else "the end of the statement"
            raise self.error(f"expected {what} but found {found}")
        self.pos += 1
        return token.text

    def qualified_name(self, what: str = "a name") -> tuple[str, ...]:
        parts = [self.identifier(what)]
        while self.accept_type(TokenType.DOT):
            parts.append(self.identifier(what))
        return tuple(parts)

    def string(self, what: str = "a string literal") -> str:
        return self.expect_type(TokenType.STRING, what).text

    def integer(self, what: str = "a number") -> int:
        token = self.expect_type(TokenType.NUMBER, what)
        try:
            return int(token.text)
        except ValueError:
            raise self.error(f"expected a whole number but found {token.text!r}", token) from None

    def properties(self) -> dict[str, str]:
        """``('k' = 'v', k2 = 'v2')``: keys may be strings or dotted names, values literals."""
        self.expect_type(TokenType.L_PAREN, "(")
        out: dict[str, str] = {}
        if self.accept_type(TokenType.R_PAREN):
            return out
        while True:
            key = self.property_key()
            if self.accept_type(TokenType.EQ) is None:
                raise self.error(f"expected = after the property {key!r}")
            out[key] = self.literal_text()
            if self.accept_type(TokenType.COMMA):
                continue
            self.expect_type(TokenType.R_PAREN, ", or )")
            return out

    def property_key(self) -> str:
        token = self.peek()
        if token is not None and token.token_type == TokenType.STRING:
            self.pos += 1
            return token.text
        return ".".join(self.qualified_name("a property name"))

    def key_list(self) -> list[str]:
        self.expect_type(TokenType.L_PAREN, "(")
        keys = [self.property_key()]
        while self.accept_type(TokenType.COMMA):
            keys.append(self.property_key())
        self.expect_type(TokenType.R_PAREN, ")")
        return keys

    def literal_text(self) -> str:
        token = self.advance()
        if token.token_type in (TokenType.STRING, TokenType.NUMBER):
            return token.text
        if token.text.upper() in ("TRUE", "FALSE"):
            return token.text.lower()
        if token.token_type == TokenType.DASH:
            return "-" + self.literal_text()
        raise self.error(f"expected a literal value but found {token.text!r}", token)

    def rest_text(self) -> str:
        """The statement's remaining source text, from the current token on."""
        token = self.peek()
        if token is None:
            return ""
        return self.sql[token.start:]

    def rest_tokens(self) -> tuple[Token, ...]:
        """The statement's tokens from the current one on, the tokens of :meth:`rest_text`, for
        :func:`parse_tokens`; () when only lexing that text again can tell its tokens (a comment
        just before it; a first word that Spark's tokenizer reads as a command, such as EXPLAIN,
        and so takes the rest of the text as one string)."""
        if self.at_end() or self.tokens[self.pos].token_type in Spark.Tokenizer.COMMANDS:
            return ()
        before = self.tokens[self.pos - 1].end + 1 if self.pos > 0 else 0
        rest = self.tokens[self.pos:]
        return tuple(rest) if lexed_alone(self.sql, rest, before, len(self.sql)) else ()

    def text_between(self, first: Token, last: Token) -> str:
        return self.sql[first.start:last.end + 1]

    def balanced_until(self, *stop_words: str) -> tuple[Token, Token]:
        """Skip tokens up to a stop word or an unmatched ``)`` or ``,`` at depth 0; the span taken."""
        depth = 0
        first = self.peek()
        last = first
        if first is None:
            raise self.error("the statement ends too early")
        while not self.at_end():
            token = self.peek()
            assert token is not None
            if depth == 0 and (token.token_type in (TokenType.COMMA, TokenType.R_PAREN)
                               or any(self.is_word(*w.split()) for w in stop_words)):
                break
            if token.token_type in (TokenType.L_PAREN,) or token.text == "<":
                depth += 1
            elif token.token_type == TokenType.R_PAREN or token.text == ">":
                depth -= 1
            last = token
            self.pos += 1
        assert last is not None
        return first, last

    def expect_end(self) -> None:
        token = self.peek()
        if token is not None:
            raise self.error(f"unexpected {token.text!r}", token)

    def error(self, message: str, token: Token | None = None) -> ParseError:
        token = token or self.peek() or (self.tokens[-1] if self.tokens else None)
        if token is None:
            return ParseError(message, sql=self.sql)
        return ParseError(message, token.line + self.line_offset, token_column(token), self.sql)
