"""The bibliography in the style the text cites: author-year labels ("Vaswani et al. 2017"),
sorted by author and year, arXiv identifiers linked.

A pybtex formatting style, registered as "authoryear" and selected in _config.yml with
``bibtex_default_style``: pybtex's "plain" style (sorted by author, year, title; it links
``eprint`` arXiv identifiers, ``doi`` and ``url``) with author-year labels.
"""
from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitle


def _last(person) -> str:
    return " ".join(person.prelast_names + person.last_names).replace("{", "").replace("}", "")


class AuthorYearLabelStyle(BaseLabelStyle):
    """One author: "Shazeer 2019"; two: "Jain and Wallace 2019"; more: "Vaswani et al. 2017"."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            people = entry.persons.get("author") or entry.persons.get("editor") or []
            if not people:
                who = entry.fields.get("organization", entry.fields.get("institution", entry.key))
            elif len(people) == 1:
                who = _last(people[0])
            elif len(people) == 2:
                who = f"{_last(people[0])} and {_last(people[1])}"
            else:
                who = f"{_last(people[0])} et al."
            yield f"{who} {entry.fields.get('year', '')}".strip()


class AuthorYearSorting(AuthorYearTitle):
    """pybtex's author-year-title order, reading a braced corporate author ({OpenAI}) as its name."""

    def person_key(self, person):
        return super().person_key(person).replace("{", "").replace("}", "")


class AuthorYearStyle(PlainStyle):
    default_label_style = AuthorYearLabelStyle
    default_sorting_style = AuthorYearSorting


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
