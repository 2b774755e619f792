"""The bibliography in the style the text cites: author-year labels ("Vaswani et al. 2017"),
sorted by author and year, arXiv identifiers linked.

A pybtex formatting style, registered as "authoryear" and selected in _config.yml with
``bibtex_default_style``: pybtex's "plain" style (sorted by author, year, title; it links
``eprint`` arXiv identifiers, ``doi`` and ``url``) with author-year labels.

The Chinese edition cites as Chinese text does: "Vaswani 等人（2017）" for ``{cite:t}``, "（Vaswani 等人，2017）"
for ``{cite:p}``, "Jain 和 Wallace", and labels "Vaswani 等人 2017". One rule: ``tools/build_zh.py`` selects the
Chinese twins of both styles, "authoryear_zh" (labels) and "author_year_zh" (sphinxcontrib-bibtex's referencing
style, ``bibtex_reference_style``), which differ from the English ones only in these words and brackets.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from sphinxcontrib.bibtex.plugin import register_plugin as register_bibtex_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle, PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitle


def _last(person) -> str:
    return " ".join(person.prelast_names + person.last_names).replace("{", "").replace("}", "")


class AuthorYearLabelStyle(BaseLabelStyle):
    """One author: "Shazeer 2019"; two: "Jain and Wallace 2019"; more: "Vaswani et al. 2017"."""

    two, more = "{} and {}", "{} et al."

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            if not people:
                who = entry.fields.get("organization", entry.fields.get("institution", entry.key))
            elif len(people) == 1:
                who = _last(people[0])
            elif len(people) == 2:
                who = self.two.format(_last(people[0]), _last(people[1]))
            else:
                who = self.more.format(_last(people[0]))
            yield f"{who} {entry.fields.get('year', '')}".strip()


class AuthorYearSorting(AuthorYearTitle):
    """pybtex's author-year-title order, reading a braced corporate author ({OpenAI}) as its name."""

    def person_key(self, person):
        return super().person_key(person).replace("{", "").replace("}", "")


class AuthorYearStyle(PlainStyle):
    default_label_style = AuthorYearLabelStyle
    default_sorting_style = AuthorYearSorting


class ChineseAuthorYearLabelStyle(AuthorYearLabelStyle):
    """"Shazeer 2019", "Jain 和 Wallace 2019", "Vaswani 等人 2017"."""

    two, more = "{} 和 {}", "{} 等人"


class ChineseAuthorYearStyle(AuthorYearStyle):
    default_label_style = ChineseAuthorYearLabelStyle


def _chinese_brackets() -> BracketStyle:
    return BracketStyle(left="（", right="）", sep="；")


@dataclass
class ChineseAuthorYearReferenceStyle(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's author-year citations in Chinese: "Vaswani 等人（2017）", "（Vaswani 等人，2017；
    Shazeer，2019）", "Jain 和 Wallace（2019）"."""

    bracket_textual: BracketStyle = field(default_factory=_chinese_brackets)
    bracket_parenthetical: BracketStyle = field(default_factory=_chinese_brackets)
    bracket_author: BracketStyle = field(default_factory=_chinese_brackets)
    bracket_label: BracketStyle = field(default_factory=_chinese_brackets)
    bracket_year: BracketStyle = field(default_factory=_chinese_brackets)
    person: PersonStyle = field(default_factory=lambda: PersonStyle(sep="、", sep2=" 和 ", last_sep=" 和 ",
                                                                     other=Text(" 等人")))
    author_year_sep: str = "，"
    text_reference_sep: str = ""
    post_text_sep: str = "，"


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    register_plugin("pybtex.style.formatting", "authoryear_zh", ChineseAuthorYearStyle)
    register_bibtex_plugin("sphinxcontrib.bibtex.style.referencing", "author_year_zh",
                           ChineseAuthorYearReferenceStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
