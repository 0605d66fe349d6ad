
BlogitsJ(Є∆я@ЖSAђDҐ?ДојkwЅBИ[јс"Ђ@‘гAvw@™Ч9ј