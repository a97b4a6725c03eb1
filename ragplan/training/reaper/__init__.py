"""REAPER training: fine-tuning data generation (:mod:`.datagen`, :mod:`.ttg`) and the route classifier of
the classifier_planner baseline (:mod:`.classifier`)."""
