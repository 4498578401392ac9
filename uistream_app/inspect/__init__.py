"""Reading a stored run back: the operator's side of the canonical log.

The admin's transcript inspector, the API's transcript endpoint and the
management commands share these pieces, each of which reads the log
through ``recording.iter_log`` (by key, a page at a time), so a run of any
length is never in memory at once:

* ``formats``: the wire dialects a stored run can be rendered in (a
  registry: name → renderer factory, file extension, content type) and the
  canonical log as JSON lines; streaming writers for both.
* ``timeline``: chunk arrival folded into a fixed-size picture (an SVG).
* ``part_views``: a ``UIMessage``'s parts prepared for a template.
* ``analysis``: the one pass over a run's log that feeds all of the above
  and makes the run's verdict: the verifiers of ``protocol.ui.verify`` (the
  ai@7 chunk schema, the reader, i.e. the SDK's own ordering errors, the
  encoder's framing rules) plus, for a stored run, the recorder's
  bookkeeping.
* ``fixture``: a stored run written out as a fixture directory.
* ``attempts``: a run's other attempts (the versions of its answer and of
  its question), as its page links them.
* ``list_filters``: the admin's filters of runs and conversations (feedback,
  outcome, model, owner), ``Exists()`` subqueries the export shares.
* ``dataset``: runs as JSONL, a line per run, streamed (the admin's export
  action and ``manage.py uistream_export``).
"""
