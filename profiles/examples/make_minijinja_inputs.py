"""Deterministic inputs for minijinja-cli's training and bench: templates (loops and filters; macros and
inheritance, held out) and the same data as JSON (trained) and as YAML and TOML (held out)."""

import json
import random
import sys
from pathlib import Path

REPORT = """\
<h1>{{ title | upper }}</h1>
{% for item in items %}
<tr class="{{ loop.cycle('odd', 'even') }}"><td>{{ loop.index }}</td><td>{{ item.name | title }}</td>
<td>{{ item.tags | join(', ') }}</td><td>{{ item.price | round(2) }}</td>
{% if item.stock > 10 %}<td>in stock</td>{% elif item.stock > 0 %}<td>few left</td>
{% else %}<td>sold out</td>{% endif %}</tr>
{% endfor %}
<p>{{ items | length }} items, {{ items | map(attribute='stock') | sum }} in stock</p>
"""

GROUPED = """\
{% for group in items | groupby('category') %}
<h2>{{ group.grouper | capitalize }}</h2>
{% for item in group.list | sort(attribute='price') %}{{ item.name | upper }}: {{ item.price }}
{% endfor %}{% endfor %}
"""

BASE = """\
<html><head><title>{% block title %}{{ title }}{% endblock %}</title></head>
<body>{% block body %}{% endblock %}</body></html>
"""

MACROS = """\
{% extends "base.html" %}
{% macro row(item, index) -%}
<li id="item-{{ index }}">{{ item.name | e }} ({{ item.category }})
{%- if item.tags %}: {{ item.tags | join(' ') }}{% endif %}</li>
{%- endmacro %}
{% block body %}<ul>{% for item in items %}{{ row(item, loop.index) }}{% endfor %}</ul>{% endblock %}
"""

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "sigma"]


def data(rng: random.Random, count: int) -> dict:
    items = [
        {
            "name": f"{rng.choice(WORDS)} {rng.choice(WORDS)} {i}",
            "category": rng.choice(["tools", "books", "games", "food"]),
            "tags": rng.sample(WORDS, rng.randrange(0, 4)),
            "price": round(rng.random() * 100, 3),
            "stock": rng.randrange(0, 30),
        }
        for i in range(count)
    ]
    return {"title": "the inventory", "items": items}


def toml_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(value)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    templates = {"report.html": REPORT, "grouped.html": GROUPED, "base.html": BASE, "macros.html": MACROS}
    for name, text in templates.items():
        (out / name).write_text(text)
    values = data(random.Random(20261207), 3000)
    (out / "data.json").write_text(json.dumps(values))
    # YAML and TOML by hand (the standard library writes neither): the same values
    yaml = [f"title: {json.dumps(values['title'])}", "items:"]
    for item in values["items"]:
        yaml.append(f"  - name: {json.dumps(item['name'])}")
        yaml += [f"    {key}: {json.dumps(item[key])}" for key in ("category", "tags", "price", "stock")]
    (out / "data.yaml").write_text("\n".join(yaml) + "\n")
    toml = [f"title = {toml_value(values['title'])}"]
    for item in values["items"]:
        toml.append("[[items]]")
        toml += [f"{key} = {toml_value(value)}" for key, value in item.items()]
    (out / "data.toml").write_text("\n".join(toml) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
