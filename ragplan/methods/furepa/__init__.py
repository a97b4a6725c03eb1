"""FuRePA's plan assessor, trained here: training groups (:mod:`.data`), features (:mod:`.features`), the
scorer saved and loaded by path (:mod:`.scorer`), training with a held-out report (:mod:`.train`,
:mod:`.pipeline`) and a synthetic multi-hop corpus to train and measure it on (:mod:`.synthetic`)."""
