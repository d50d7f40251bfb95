# Merges the two 0010 branches: chart payloads in storage (0010-0012) and Patch.commit (0010).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('reviewapp', '0010_patch_commit'),
        ('reviewapp', '0012_remove_comparisonchart_payload'),
    ]

    operations = [
    ]
