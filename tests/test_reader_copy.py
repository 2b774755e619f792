"""tools/reader_copy.py: the reader's copies of the chapters (reader/chapters/, committed) are what
the tool makes from the chapters now, hold no MyST that Jupyter or Colab would show raw, carry every
glued number, and the book's launch buttons and the README open them."""
from __future__ import annotations

import base64
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import reader_copy  # noqa: E402

MYST = re.compile(r"\{(glue|cite|numref|ref|doc|term|eq)[\w:-]*\}`|^(:::|```)\{", re.M)


def _prose(nb) -> str:
    """The markdown cells' text without its code blocks and code spans (they may show MyST as code)."""
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = re.sub(r"^(`{3,}|~{3,})(?!\{).*?^\1", "", text, flags=re.M | re.S)
    return re.sub(r"(`+)(?!\{).*?\1", "", text)


def test_the_committed_copies_are_what_the_tool_makes_now(capsys):
    assert reader_copy.main(["--check"]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("path", reader_copy.notebooks(), ids=lambda p: p.name)
def test_a_copy_has_the_glued_numbers_and_no_myst_left(path):
    chapter = nbformat.read(path, as_version=4)
    copy = nbformat.read(ROOT / "reader" / path.relative_to(ROOT), as_version=4)
    assert not MYST.search(_prose(copy)), MYST.search(_prose(copy))
    glue = reader_copy.glue_data(chapter)
    from myst_nb.core.variables import format_plain_text

    prose = "\n".join(c.source for c in copy.cells if c.cell_type == "markdown")
    for content in re.findall(r"\{glue:text\}`([^`]*)`", "\n".join(
            c.source for c in chapter.cells if c.cell_type == "markdown")):
        key, _, fmt = content.partition(":")
        value = format_plain_text(glue[key]["text/plain"], fmt)
        assert reader_copy._text(value) in prose, (key, value)
    # code cells: the chapter's code, no outputs
    assert [c.source for c in copy.cells if c.cell_type == "code"] == \
        [c.source for c in chapter.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in copy.cells if c.cell_type == "code")
    # every pasted figure travels with the copy, as an attachment
    for cell in copy.cells:
        for name in re.findall(r"\(attachment:([^)]+)\)", cell.source) if cell.cell_type == "markdown" else []:
            assert name in cell.get("attachments", {}), name
    assert copy.metadata.kernelspec.display_name == "Python 3 (ipykernel)"  # opening it changes nothing


def test_the_launch_buttons_and_the_readme_open_the_reader_copies():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["path_to_book"] == "reader" and "reader" in config["exclude_patterns"]
    for path in reader_copy.notebooks():
        assert (ROOT / "reader" / path.relative_to(ROOT)).is_file(), path
    readme = (ROOT / "README.md").read_text()
    assert "/blob/main/reader/chapters/<chapter>.ipynb" in readme


# --------------------------------------------------------------------------- the conversion itself
def _notebook(tmp_path, markdown: str, glue: dict) -> Path:
    nb = nbformat.v4.new_notebook()
    outputs = [nbformat.v4.new_output("display_data", data={f"{reader_copy.GLUE_PREFIX}{m}": v for m, v in b.items()},
                                      metadata={"scrapbook": {"name": k, "mime_prefix": reader_copy.GLUE_PREFIX}})
               for k, b in glue.items()]
    code = nbformat.v4.new_code_cell("x = 1", outputs=outputs)
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), code]
    path = tmp_path / "chapters" / "x.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _convert(tmp_path, markdown, glue=None, numbers=None, monkeypatch=None):
    path = _notebook(tmp_path, markdown, glue or {})
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())  # the book's address
    monkeypatch.setattr(reader_copy, "ROOT", tmp_path)
    copy = reader_copy.reader_copy(path, numbers or {}, reader_copy.Citations(ROOT / "references.bib"))
    return copy.cells[0], copy


def test_glue_text_is_formatted_as_the_book_formats_it_and_never_becomes_html(tmp_path, monkeypatch):
    cell, _ = _convert(tmp_path, "acc {glue:text}`acc:.2f`, n {glue:text}`n`, {glue:text}`tag`; `{glue:text}`code``",
                       {"acc": {"text/plain": "0.98765"}, "n": {"text/plain": "5"},
                        "tag": {"text/plain": "'<b>*x*</b>'"}}, monkeypatch=monkeypatch)
    assert cell.source == r"acc 0.99, n 5, &lt;b&gt;\*x\*&lt;/b&gt;; `{glue:text}`code``"


def test_directives_become_plain_markdown(tmp_path, monkeypatch):
    png = base64.b64encode(b"\x89PNG fake").decode()
    markdown = ("(sec-x)=\n## Title\n\n```{glue:figure} fig_x\n:name: fig-x\n:alt: A [plot].\n\nThe caption, "
                "{glue:text}`n`.\n```\n\nSee {numref}`fig-x` and {cite:t}`vaswani2017attention`, "
                "{cite:p}`vaswani2017attention,michel2019sixteen`.\n\n:::{dropdown} Solution\nBody, {glue:text}`n`:\n"
                "```python\ncode {glue:text}`n`\n```\n:::\n\n```{glue:} live_x\n```\n\n```{note}\nA note.\n```")
    cell, _ = _convert(tmp_path, markdown, {"fig_x": {"image/png": png, "text/plain": "<Figure>"},
                                            "n": {"text/plain": "3"}, "live_x": {"text/html": "<div></div>"}},
                       numbers={"fig-x": 7}, monkeypatch=monkeypatch)
    text = cell.source
    assert text.startswith("## Title\n\n![A (plot).](attachment:fig_x.png)\n\n**Fig. 7.** The caption, 3.")
    assert cell.attachments == {"fig_x.png": {"image/png": png}}
    assert "See Fig. 7 and [Vaswani et al. (2017)](https://arxiv.org/abs/1706.03762), (" in text
    assert "[Michel et al. 2019](https://arxiv.org/abs/1905.10650))" in text
    # a code block inside a solution stays code: its MyST-looking text is not converted
    assert "<details>\n<summary>Solution</summary>\n\nBody, 3:\n```python\ncode {glue:text}`n`\n```\n\n</details>" in text
    assert "*A live view goes here in the book" in text and "> **Note.**\n>\n> A note." in text
    assert "(sec-x)=" not in text


@pytest.mark.parametrize("markdown, message", [
    ("{unknownrole}`x`", r"role \{unknownrole\}"),
    ("```{mermaid}\nx\n```", r"directive \{mermaid\}"),
    (":::{dropdown} open\nnever closed", "never closed"),
    ("{glue:text}`missing`", "glue key 'missing' has no stored output"),
    ("{numref}`fig-nowhere`", "'fig-nowhere' is not a numbered figure"),
    ("{cite:t}`nobody2099`", "'nobody2099' is not in references.bib"),
])
def test_what_it_cannot_convert_stops_it_naming_the_chapter_and_the_construct(tmp_path, monkeypatch, markdown,
                                                                                message):
    with pytest.raises(ValueError, match=message) as info:
        _convert(tmp_path, markdown, monkeypatch=monkeypatch)
    assert "chapters/x.ipynb" in str(info.value) or "references.bib" in str(info.value)


@pytest.mark.parametrize("argument, message", [
    ("../../../../../../etc/hostname.png", "outside the repository"),  # read any file on disk into the copy
    ("/etc/passwd.svg", "outside the repository"),
    ("diagram.gif", "is not an .svg or .png"),
])
def test_a_figure_path_must_stay_in_the_repository(tmp_path, monkeypatch, argument, message):
    """``{figure} ../../x.png`` embedded whatever file it named (base64, as an attachment) into the copy."""
    with pytest.raises(ValueError, match=rf"chapters/x.ipynb: \{{figure\}} {re.escape(repr(argument))}.*{message}"):
        _convert(tmp_path, f"```{{figure}} {argument}\n:name: fig-a\n\nCap.\n```", monkeypatch=monkeypatch)


@pytest.mark.parametrize("key", ["a b", "x)<img src=x onerror=alert(1)>", "../up", "fig\n"])
def test_a_glue_figure_key_that_would_break_its_attachment_link_is_refused(tmp_path, monkeypatch, key):
    """The key became the attachment's name, inside ``![alt](attachment:KEY.png)``: a ``)`` ended the link and
    the rest of the key was Markdown (raw HTML) in the copy."""
    png = base64.b64encode(b"\x89PNG fake").decode()
    converter = reader_copy.Converter(ROOT / "chapters" / "x.ipynb", {key: {"image/png": png}}, {}, None)
    with pytest.raises(ValueError, match=re.escape(repr(key))):
        converter.directive("glue:figure", key, {}, "Cap.")


@pytest.mark.parametrize("markdown, want", [
    ("Hi <img src=x onerror=alert(1)> there", "Hi &lt;img src=x onerror=alert(1)> there"),
    ("<script>alert(1)</script>", "&lt;script>alert(1)&lt;/script>"),
    ("a <!-- hidden --> b", "a &lt;!-- hidden --> b"),
    ("see <javascript:alert(1)>", "see &lt;javascript:alert(1)>"),  # an autolink
    ("the pronoun <span lang=\"zh-CN\">她</span>, `<eos>` and $i<j$", None),  # the chapters' own: kept
])
def test_raw_html_in_a_chapters_text_never_becomes_html_in_the_copy(tmp_path, monkeypatch, markdown, want):
    """A chapter's text went into the copy's Markdown as it was, and Jupyter renders raw HTML in Markdown."""
    cell, _ = _convert(tmp_path, markdown, monkeypatch=monkeypatch)
    assert cell.source == (markdown if want is None else want)


@pytest.mark.parametrize("markdown", ["[click](javascript:alert(1))", "[x](data:text/html,<b>)", "[y](vbscript:z)"])
def test_a_link_to_a_script_is_refused_naming_it(tmp_path, monkeypatch, markdown):
    with pytest.raises(ValueError, match=r"chapters/x.ipynb: link to .*(javascript|data|vbscript):"):
        _convert(tmp_path, markdown, monkeypatch=monkeypatch)
