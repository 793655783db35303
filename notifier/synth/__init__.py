"""synth: synthetic sample histories with labelled incidents, for the demo, the benchmarks and
the backtests (``notifier history synth``). They write the layout of :mod:`notifier.history`, so
whatever reads the service's own history reads them too.

* ``basic``: :func:`synthesize`, every group healthy but for its one injected fault
  (``--profile basic``).
* ``production``: :func:`synthesize_fleet`, a production fleet with the benign patterns operators
  live with (restarts, deploys, spikes, batch consumers, outages) and incidents labelled from
  when they can be told apart (``--profile fleet``), plus its ``patterns.csv``.
* ``base``: what the two share: argument checks, names, scan times and the Parquet writer of
  whole-run arrays.

Imports :mod:`notifier.history` and :mod:`notifier.types` only.
"""

from notifier.synth.basic import INCIDENT_KINDS, SynthResult, synthesize
from notifier.synth.production import FLEET_INCIDENT_KINDS, FleetResult, synthesize_fleet

__all__ = [
    "FLEET_INCIDENT_KINDS",
    "INCIDENT_KINDS",
    "FleetResult",
    "SynthResult",
    "synthesize",
    "synthesize_fleet",
]
