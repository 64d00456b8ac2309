"""The checking and timing stages, one module each (st_NAME: the stage NAME), and what they share:
the structures, the model and the LAMMPS data and input (inputs.py), the versus stages' settings
and setup (versus_setup.py).  pip_route.py installs its own plugin and tool with pip."""
