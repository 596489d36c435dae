"""The review section's notes: a shot's fixes and the chunks they rendered again, and a form that writes
a note as a fix and downloads the shot's ``fixes:`` as YAML.

The page stays self-contained: the form's script is inline (the page's Content-Security-Policy allows
inline script and nothing else), the download is a ``Blob`` (no server; it works from ``file://``).
The file is the form ``jobs.render --fixes FILE`` reads (:mod:`cluster.spec.fixes_file`)::

    shot: "sc010"
    fixes:
      - {frames: "1013-1028", track: 2, action: keep_plate}
      - {frames: "1070-1070", box: {1070: [410, 120, 530, 270]}, identity: "hero"}

A ``faces`` note sets render settings on its frames (the keys a fix may carry,
:data:`~pipeline.tracking.fixes.RENDER_FACE_FIELDS`, with the ranges :class:`~pipeline.faces.config.FaceConfig`
allows; the form's inputs are made from them)::

      - {frames: "1081-1092", faces: {enhance: true, mask_blur: 0.12}}

Its ``fixes:`` list can also be pasted under the shot in the spec.  A box is dragged on a review row's
"before" picture; its corners are scaled from the picture to the plate's pixels (the frame's real size,
``data-w``/``data-h``) and keyed on that picture's frame number (``data-frame``).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from cluster.report.summary import FixMark, RerenderedChunk
from pipeline.faces.config import FaceConfig
from pipeline.tracking.fixes import RENDER_FACE_FIELDS

CSS = """
.notes{margin-top:10px;padding:8px 10px;background:#f3f6fa;border-radius:6px;font-size:13px}
.notes label{margin-right:10px}
.notes input[name=frames]{width:110px}.notes input[name=track]{width:56px}
.notes pre{background:#fff;border:1px solid #d9dde2;padding:6px;margin:6px 0;min-height:1.5em;white-space:pre-wrap}
.notes .err{color:#c62828}
.notes fieldset{border:1px solid #d9dde2;border-radius:4px;margin:6px 0;padding:4px 8px}
.notes fieldset input{width:64px}
.pick{position:relative;display:inline-block;cursor:crosshair;user-select:none}
.pick .sel{position:absolute;border:2px solid #00e5ff;pointer-events:none;display:none}
.fixlist li{margin:2px 0}
"""

# The notes' behaviour: one closure per shot card; no globals, nothing fetched.
SCRIPT = r"""
(() => {
  const q = JSON.stringify;
  const fixYaml = f => {
    const parts = ['frames: ' + q(f.frames)];
    if (f.track !== undefined) parts.push('track: ' + f.track);
    if (f.action) parts.push('action: ' + f.action);
    if (f.box) parts.push('box: {' + Object.keys(f.box).map(k => k + ': [' + f.box[k].join(', ') + ']').join(', ') + '}');
    if (f.identity) parts.push('identity: ' + q(f.identity));
    if (f.faces) parts.push('faces: {' + Object.keys(f.faces).map(k => k + ': ' + q(f.faces[k])).join(', ') + '}');
    return '  - {' + parts.join(', ') + '}';
  };
  const shotYaml = (shot, fixes) => 'shot: ' + q(shot) + '\nfixes:\n' + fixes.map(fixYaml).join('\n') + '\n';
  const range = text => {
    const m = /^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$/.exec(text);
    if (!m) return null;
    const a = parseInt(m[1], 10), b = m[2] === undefined ? a : parseInt(m[2], 10);
    return b < a ? null : [a, b];
  };
  // A point of a picture (CSS pixels from its corner) in the plate's stored pixels: the picture is the
  // frame shown turned data-turns quarter turns counter-clockwise (np.rot90), scaled to its box.
  const plate = (img, point) => {
    const w = Number(img.dataset.w), h = Number(img.dataset.h), turns = Number(img.dataset.turns || 0);
    const r = img.getBoundingClientRect(), odd = turns % 2 === 1;
    const u = point[0] * (odd ? h : w) / r.width, v = point[1] * (odd ? w : h) / r.height;
    const turned = [[u, v], [w - v, u], [w - u, h - v], [v, h - u]][turns];
    return turned.map(Math.round);
  };
  document.querySelectorAll('form.notes').forEach(form => {
    const card = form.closest('.card'), shot = card.dataset.shot, fixes = [];
    const field = name => form.elements.namedItem(name);
    const out = form.querySelector('pre'), err = form.querySelector('.err');
    let box = {};
    const show = () => { out.textContent = fixes.length ? shotYaml(shot, fixes) : ''; field('download').disabled = !fixes.length; };
    const settings = form.querySelector('fieldset.faces');
    const kind = () => { settings.hidden = field('action').value !== 'faces'; };
    field('action').addEventListener('change', kind);
    // The faces settings set (empty: unchanged), or an error naming the first out of its range.
    const faces = () => {
      const out = {};
      for (const input of settings.querySelectorAll('[data-face]')) {
        const key = input.dataset.face, v = input.value.trim();
        if (v === '') continue;
        if (input.dataset.kind === 'bool') { out[key] = v === 'true'; continue; }
        const n = Number(v), lo = Number(input.min), hi = Number(input.max);
        if (!Number.isFinite(n) || n < lo || n > hi) return key + ': a number from ' + lo + ' to ' + hi;
        out[key] = n;
      }
      return Object.keys(out).length ? out : 'faces: set at least one setting';
    };
    card.querySelectorAll('button.note').forEach(b => b.addEventListener('click', () => {
      field('frames').value = b.dataset.frames; field('track').value = b.dataset.track || '';
      form.scrollIntoView({block: 'nearest'});
    }));
    card.querySelectorAll('.pick').forEach(pick => {
      const img = pick.querySelector('img'), sel = pick.querySelector('.sel');
      let start = null;
      const at = e => {
        const r = img.getBoundingClientRect();
        return [Math.min(Math.max(e.clientX - r.left, 0), r.width), Math.min(Math.max(e.clientY - r.top, 0), r.height)];
      };
      const draw = (a, b) => {
        Object.assign(sel.style, {display: 'block', left: Math.min(a[0], b[0]) + 'px', top: Math.min(a[1], b[1]) + 'px',
          width: Math.abs(a[0] - b[0]) + 'px', height: Math.abs(a[1] - b[1]) + 'px'});
      };
      pick.addEventListener('mousedown', e => { e.preventDefault(); start = at(e); draw(start, start); });
      pick.addEventListener('mousemove', e => { if (start) draw(start, at(e)); });
      pick.addEventListener('mouseup', e => {
        if (!start) return;
        const corners = [plate(img, start), plate(img, at(e))];
        start = null;
        const xs = corners.map(c => c[0]), ys = corners.map(c => c[1]);
        const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
        if (x1 <= x0 || y1 <= y0) return;
        const frame = Number(img.dataset.frame);
        box[frame] = [x0, y0, x1, y1];
        field('action').value = 'box';
        const frames = range(field('frames').value);
        if (!frames || frame < frames[0] || frame > frames[1]) field('frames').value = frame + '-' + frame;
        field('box').value = Object.keys(box).map(k => k + ': [' + box[k].join(', ') + ']').join('; ');
      });
    });
    form.addEventListener('submit', e => {
      e.preventDefault();
      err.textContent = '';
      const frames = range(field('frames').value), action = field('action').value;
      const track = field('track').value.trim(), identity = field('identity').value;
      if (!frames) { err.textContent = 'frames: give a range like 1013-1028'; return; }
      const fix = {frames: frames[0] + '-' + frames[1]};
      if (action === 'box') {
        if (!Object.keys(box).length) { err.textContent = 'drag a box on a picture of these frames'; return; }
        fix.box = box; if (identity) fix.identity = identity;
      } else if (action === 'faces') {
        const set = faces();
        if (typeof set === 'string') { err.textContent = set; return; }
        fix.faces = set;
      } else {
        if (!/^\d+$/.test(track)) { err.textContent = 'track: give the track number'; return; }
        fix.track = parseInt(track, 10);
        if (action === 'keep_plate') fix.action = 'keep_plate';
        else if (identity) fix.identity = identity;
        else { err.textContent = 'identity: choose one'; return; }
      }
      fixes.push(fix); box = {}; field('box').value = '';
      card.querySelectorAll('.pick .sel').forEach(s => { s.style.display = 'none'; });
      show();
    });
    field('download').addEventListener('click', () => {
      const blob = new Blob([shotYaml(shot, fixes)], {type: 'application/x-yaml'});
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob); a.download = shot + '_fixes.yaml';
      document.body.appendChild(a); a.click(); a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    });
    show(); kind();
  });
})();
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def note_form(identities: Sequence[str]) -> str:
    """A shot card's form: frames, track, action (keep the plate, another identity, a box, render
    settings), the fixes written so far as YAML, and the download."""
    choices = "".join(f'<option value="{_e(n)}">{_e(n)}</option>' for n in identities)
    return (
        '<form class="notes" novalidate><b>Write a note as a fix</b> '
        '<span class="meta">(a row\'s "note" button fills in its frames and track; drag on a "before" '
        "picture to draw a missed face's box)</span><br>"
        '<label>frames <input name="frames" placeholder="1013-1028"></label>'
        '<label>track <input name="track" inputmode="numeric"></label>'
        '<label>action <select name="action"><option value="keep_plate">keep the plate</option>'
        '<option value="identity">another identity</option><option value="box">a missed face (box)</option>'
        '<option value="faces">render settings (faces)</option>'
        "</select></label>"
        f'<label>identity <select name="identity"><option value="">–</option>{choices}</select></label>'
        f"{faces_inputs()}"
        '<input name="box" type="hidden"><button type="submit" name="add">add fix</button> '
        '<button type="button" name="download" disabled>download fixes YAML</button>'
        '<div class="err"></div><pre></pre></form>'
    )


def faces_inputs() -> str:
    """The ``faces`` settings a fix may set, one input each (empty: unchanged): a yes/no choice for a switch,
    a number within the range :class:`~pipeline.faces.config.FaceConfig` allows, the shot's default shown."""
    out = []
    for key in RENDER_FACE_FIELDS:
        info = FaceConfig.model_fields[key]
        if info.annotation is bool:
            options = "".join(f'<option value="{v}">{v}</option>' for v in ("true", "false"))
            control = (
                f'<select name="faces.{key}" data-face="{key}" data-kind="bool" title="default: '
                f'{str(info.default).lower()}"><option value="">–</option>{options}</select>'
            )
        else:
            low = next(m.ge for m in info.metadata if hasattr(m, "ge"))  # Field(ge=..., le=...)
            high = next(m.le for m in info.metadata if hasattr(m, "le"))
            control = (
                f'<input name="faces.{key}" data-face="{key}" data-kind="number" type="number" step="any" '
                f'min="{low}" max="{high}" placeholder="{info.default}" title="{low} to {high}">'
            )
        out.append(f"<label>{_e(key)} {control}</label>")
    return (
        '<fieldset class="faces"><legend>render settings on these frames (empty: the shot\'s)</legend>'
        f"{''.join(out)}</fieldset>"
    )


def fixes_block(fixes: Sequence[FixMark], rerendered: Sequence[RerenderedChunk]) -> str:
    """The shot's fixes and the chunks this run rendered again because of them ('' when neither)."""
    out = []
    if fixes:
        items = "".join(f'<li data-fix="{f.index}">{_e(f.label)}</li>' for f in fixes)
        out.append(f'<div class="fixlist"><b>Fixes ({len(fixes)})</b><ul>{items}</ul></div>')
    if rerendered:
        items = "".join(
            f'<li data-chunk="{c.chunk}">chunk {c.chunk} (frames {c.frames[0]}–{c.frames[1]}): '
            f"{_e('; '.join(c.reasons))}</li>"
            for c in rerendered
        )
        out.append(f'<div class="fixlist rerendered"><b>Rendered again for fixes</b><ul>{items}</ul></div>')
    return "".join(out)
