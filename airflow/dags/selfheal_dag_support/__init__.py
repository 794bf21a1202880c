"""What the selfheal DAGs share: connections, the serve client, the steps, the reports.

The DAG files stay declarations; every step lives here and calls the project's library
(the live reader, the planners, the action builder and signer). Imports of the project
happen inside the functions, so parsing a DAG file costs only Airflow's own imports.
This folder is in `.airflowignore`: it holds no DAGs.
"""
