"""``python -m notifier.synth.independent``: write a corpus (see the package's docstring)."""

from notifier.synth.independent.fleet import main

if __name__ == "__main__":
    main()
